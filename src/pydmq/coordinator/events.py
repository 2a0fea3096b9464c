"""The event queue of one coordinator shard: its operations run one at a time, in order."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

__all__ = ["EventQueue"]

log = logging.getLogger(__name__)

Event = Callable[[], None]


class EventQueue:
    """Serializes the events of one shard without a lock; owned by the event loop.

    An event scheduled while the queue is idle runs at once, inside :meth:`schedule` (a request
    is served without a task switch); one scheduled while another event runs (by that event, or
    by a callback it triggered) is queued and runs once the running one returns. So an
    operation always sees the shard as the previous operation left it, never half-changed. An
    event that raises is logged and the queue goes on."""

    __slots__ = ("_events", "_name", "_running")

    def __init__(self, name: str) -> None:
        self._name = name
        self._events: deque[Event] = deque()
        self._running = False

    def schedule(self, event: Event) -> None:
        self._events.append(event)
        if self._running:
            return
        self._running = True
        try:
            while self._events:
                current = self._events.popleft()
                try:
                    current()
                except Exception:
                    log.exception("an event of %s failed", self._name)
        finally:
            self._running = False

    def __len__(self) -> int:
        return len(self._events)
