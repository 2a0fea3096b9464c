"""Handling a large request in slices, so that other connections are served in between.

A handler written as a generator of steps (each step yields how many request elements it has
just started on: a topic, a partition, a resource) runs through :func:`in_slices`. A request
of up to :data:`SLICE_ELEMENTS` elements, every request of a normal workload, is handled at
once and answered synchronously, as before (deterministic: the decision depends on the
request only). A larger one (up to its decode budget, e.g. a ListOffsets of 100,000
partitions: ~0.5 s of handler work here) returns a coroutine that gives the event loop back
at the cadence of :mod:`pydmq.api.slices` (after every slice of :data:`SLICE_ELEMENTS`
elements or ``SLICE_SECONDS``, whichever comes first: steps differ in cost, deleting a topic
removes files), so no connection waits for the whole request. Everything runs on the event
loop; a slice sees the broker state of its own moment, as two consecutive requests would.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import TypeVar, cast

from pydmq.api.slices import SLICE_ELEMENTS, run_sliced

__all__ = ["SLICE_ELEMENTS", "in_slices"]

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
    await run_sliced(_drain(steps))
    result = finish()
    if inspect.isawaitable(result):
        return cast("T", await result)
    return result


def _drain(steps: Iterator[int]) -> Generator[int, None, None]:
    yield from steps
