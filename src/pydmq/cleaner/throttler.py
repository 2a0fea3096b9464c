"""Throttler: keeps the cleaner threads' I/O under ``log.cleaner.io.max.bytes.per.second``.

Shared by every cleaner thread of a broker (as Kafka's one throttler); thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]

_WINDOW_S = 0.3  # Kafka checks its rate over windows of 300 ms


class Throttler:
    """Sleeps the calling thread whenever the bytes counted in the current window exceed what
    the rate allows for the time elapsed in it."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._window_start = clock()
        self._bytes = 0.0
        self.slept_s = 0.0

    def acquire(self, n: int) -> None:
        """Count ``n`` bytes read or written; sleep if that runs ahead of the rate."""
        rate = self.bytes_per_second
        if rate == float("inf"):
            return
        with self._lock:
            self._bytes += n
            now = self._clock()
            elapsed = now - self._window_start
            ahead = self._bytes / rate - elapsed
            if ahead <= 0:
                if elapsed >= _WINDOW_S:
                    self._window_start, self._bytes = now, 0.0
                return
            self.slept_s += ahead
        self._sleep(ahead)
