"""Handling a large request in slices, so that other connections are served in between.

A handler written as a generator of steps (each step yields how many request elements it has
just started on: a topic, a partition, a resource) runs through :func:`in_slices`. A request
of up to :data:`SLICE_ELEMENTS` elements, every request of a normal workload, is handled at
once and answered synchronously, as before (deterministic: the decision depends on the
request only). A larger one (up to its decode budget, e.g. a ListOffsets of 100,000
partitions: ~0.5 s of handler work here) returns a coroutine that gives the event loop back
after every slice of :data:`SLICE_ELEMENTS` elements or :data:`SLICE_SECONDS`, whichever comes
first (steps differ in cost: deleting a topic removes files), so no connection waits for the
whole request. Everything runs on the event loop; a slice sees the broker state of its own
moment, as two consecutive requests would.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar, cast

__all__ = ["SLICE_ELEMENTS", "in_slices"]

# ~10-50 ms of handler work per slice on the 2-core VM of DESIGN.md §8.
SLICE_ELEMENTS = 5_000
SLICE_SECONDS = 0.02

T = TypeVar("T")


def in_slices(steps: Iterator[int], finish: Callable[[], T | Awaitable[T]]) -> T | Awaitable[T]:
    """Run ``steps``, then return ``finish()``; past one slice, as a coroutine that yields."""
    done = 0
    for elements in steps:
        done += elements
        if done >= SLICE_ELEMENTS:
            return _rest(steps, finish)
    return finish()


async def _rest(steps: Iterator[int], finish: Callable[[], T | Awaitable[T]]) -> T:
    await asyncio.sleep(0)
    done = 0
    clock = time.monotonic
    deadline = clock() + SLICE_SECONDS
    for elements in steps:
        done += elements
        if done >= SLICE_ELEMENTS or clock() >= deadline:
            await asyncio.sleep(0)
            done = 0
            deadline = clock() + SLICE_SECONDS
    result = finish()
    if inspect.isawaitable(result):
        return cast("T", await result)
    return result
