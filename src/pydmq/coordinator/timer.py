"""Timers of one coordinator shard (Kafka's CoordinatorTimer)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from pydmq.coordinator.api import CoordinatorError, CoordinatorResult

__all__ = ["CoordinatorTimer", "TimerKey", "TimerOperation", "run_callback"]

log = logging.getLogger(__name__)

S = TypeVar("S")

TimerKey = Hashable
"""Names a timer of a shard: a string, or a tuple such as ``("heartbeat", group, member)``."""

TimerOperation = Callable[[S], CoordinatorResult[Any, None]]
"""What an expired timer does: a write operation of its shard."""

ScheduleWrite = Callable[[TimerOperation[S], Hashable | None], "asyncio.Future[None]"]


def run_callback(
    callback: Callable[..., None], *args: object
) -> Callable[[object], CoordinatorResult[Any, None]]:
    """A timer operation that calls ``callback(*args)`` and adds no records itself (for state
    still changed in place, whose callback writes its own records)."""

    def operation(shard: object) -> CoordinatorResult[Any, None]:
        callback(*args)
        return CoordinatorResult((), None)

    return operation


class CoordinatorTimer(Generic[S]):
    """Named timers of one shard; owned by the event loop.

    An expired timer does not touch the shard itself: its operation is scheduled as a write of
    the shard, so it runs in the shard's event queue like any request and its records are
    committed before they are replayed. Scheduling a key again replaces its timer; the runtime
    cancels every timer when the shard is unloaded, so no timer fires for a partition led
    elsewhere."""

    __slots__ = ("_name", "_timers", "_write")

    def __init__(self, name: str, write: ScheduleWrite[S]) -> None:
        self._name = name
        self._write = write
        self._timers: dict[TimerKey, asyncio.TimerHandle] = {}

    def schedule(
        self,
        key: TimerKey,
        delay_ms: int,
        operation: TimerOperation[S],
        *,
        write_key: Hashable | None = None,
    ) -> None:
        """Run ``operation`` in ``delay_ms`` (needs the running loop), replacing ``key``'s;
        with ``write_key`` it is a keyed write (see ``CoordinatorRuntime.schedule_write``)."""
        self.cancel(key)
        self._timers[key] = asyncio.get_running_loop().call_later(
            max(delay_ms, 0) / 1000, self._fire, key, operation, write_key
        )

    def cancel(self, key: TimerKey) -> None:
        handle = self._timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: TimerKey) -> bool:
        return key in self._timers

    def cancel_all(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def _fire(
        self, key: TimerKey, operation: TimerOperation[S], write_key: Hashable | None
    ) -> None:
        del self._timers[key]
        self._write(operation, write_key).add_done_callback(self._report)

    def _report(self, future: asyncio.Future[None]) -> None:
        exc = future.exception()
        if isinstance(exc, CoordinatorError):
            log.info("a timer of %s did not write: %s", self._name, exc)
        elif exc is not None:
            log.error("a timer of %s failed", self._name, exc_info=exc)

    def __len__(self) -> int:
        return len(self._timers)
