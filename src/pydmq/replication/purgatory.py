"""Delayed operations: requests parked until enough data arrives or their timeout passes.

A waiter watches a set of partitions; ``notify(tp)`` (called after every append) wakes the
waiters of that partition. Waking only re-checks: the waiting handler decides whether it is
satisfied. Owned by the event loop; no locks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from pydmq.storage.api import TopicPartition

__all__ = ["DelayedOperationPurgatory", "wait_for_notification", "wait_until_settled"]


class DelayedOperationPurgatory:
    """Maps watched partitions to the futures of waiting requests."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def watch(self, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(future)

        def unwatch(_: asyncio.Future[None]) -> None:
            for tp in keys:
                watchers = self._watchers.get(tp)
                if watchers is not None:
                    watchers.discard(future)
                    if not watchers:
                        del self._watchers[tp]

        future.add_done_callback(unwatch)
        return future

    def notify(self, tp: TopicPartition) -> None:
        watchers = self._watchers.get(tp)
        if watchers:
            for future in list(watchers):
                if not future.done():
                    future.set_result(None)

    def notify_all(self) -> None:
        for watchers in list(self._watchers.values()):
            for future in list(watchers):
                if not future.done():
                    future.set_result(None)

    def __len__(self) -> int:
        return len({f for watchers in self._watchers.values() for f in watchers})


async def wait_for_notification(
    purgatory: DelayedOperationPurgatory,
    partitions: list[TopicPartition],
    timeout_s: float,
    waiter: asyncio.Future[None] | None = None,
) -> bool:
    """Wait until one of ``partitions`` is notified (True) or ``timeout_s`` passed (False);
    ``waiter``: a watch of them taken earlier (a notification since then counts)."""
    if waiter is None:
        waiter = purgatory.watch(partitions)
    try:
        await asyncio.wait_for(waiter, timeout_s)
        return True
    except TimeoutError:
        return False
    finally:
        if not waiter.done():
            waiter.cancel()


async def wait_until_settled(
    purgatory: DelayedOperationPurgatory,
    unsettled: Callable[[], list[TopicPartition]],
    timeout_ms: int,
) -> None:
    """Wait until ``unsettled()`` (the partitions of the entries still waiting) is empty or
    ``timeout_ms`` passed, re-checking whenever one of those partitions is notified."""
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000
    while True:
        waiting = unsettled()
        if not waiting:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        await wait_for_notification(purgatory, waiting, remaining)
