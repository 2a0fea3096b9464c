"""The cadence at which large request work gives the event loop back.

A request of many elements (a Fetch of 100,000 partitions, a ListOffsets of as many: ~0.5-1.5 s
of work here) must not hold the loop that serves every other connection. Work written as a
generator of steps (each step yields how many request elements it has just started on) is
driven by :func:`run_sliced`, which gives the loop back after every :data:`SLICE_ELEMENTS`
elements or :data:`SLICE_SECONDS`, whichever comes first (steps differ in cost). Used by the
broker's handlers (:mod:`pydmq.broker.handlers._slices`) and by the replica manager's reads
(:mod:`pydmq.replication.fetch`). Everything runs on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from typing import TypeVar

__all__ = ["SLICE_ELEMENTS", "SLICE_SECONDS", "run_sliced"]

# ~10-50 ms of handler work per slice on the 2-core VM of DESIGN.md §8.
SLICE_ELEMENTS = 5_000
SLICE_SECONDS = 0.02

T = TypeVar("T")


async def run_sliced(steps: Generator[int, None, T]) -> T:
    """Run ``steps`` to its end, yielding to the loop between slices; its return value."""
    clock = time.monotonic
    deadline = clock() + SLICE_SECONDS
    done = 0
    while True:
        try:
            done += next(steps)
        except StopIteration as finished:
            result: T = finished.value
            return result
        if done >= SLICE_ELEMENTS or clock() >= deadline:
            await asyncio.sleep(0)
            done = 0
            deadline = clock() + SLICE_SECONDS
