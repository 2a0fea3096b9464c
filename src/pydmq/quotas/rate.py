"""Kafka's windowed rate and its throttle-time formula, for the quota managers.

:class:`SampledRate` is Kafka's ``Rate`` over a ``SampledTotal`` (``org.apache.kafka.common.
metrics.stats``) with ``samples`` windows of ``window_ms`` (``quota.window.num``, 11, and
``quota.window.size.seconds``, 1 s): a value is added to the current sample, which is replaced
by the next one once it is ``window_ms`` old; samples not touched for ``samples * window_ms``
are reset; the rate is the total of the samples divided by the time they cover, counted as at
least ``samples - 1`` whole windows (so a new sensor does not report a burst as a huge rate).

:func:`throttle_time_ms` is Kafka's ``QuotaUtils.throttleTime``: how long the client must wait
for its rate to fall back to the bound, ``(rate - bound) / bound * window``, rounded.

Sans-IO: the caller passes the time (milliseconds). Not thread-safe: each rate is owned by
the task recording into it (the broker's event loop).
"""

from __future__ import annotations

import math

__all__ = ["SampledRate", "throttle_time_ms"]


class SampledRate:
    """A rate per second over a ring of samples; see the module docstring."""

    __slots__ = ("_current", "_samples", "_starts", "_values", "_window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self._samples = samples
        self._window_ms = window_ms
        # Kafka creates its samples lazily; a ring created whole, its unused samples reset at
        # creation, gives the same totals and the same oldest start.
        self._starts = [now_ms] * samples
        self._values = [0.0] * samples
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (Kafka's ``SampledStat.record``)."""
        current = self._current
        if now_ms - self._starts[current] >= self._window_ms:
            current = self._current = (current + 1) % self._samples
            self._starts[current] = now_ms
            self._values[current] = 0.0
        self._values[current] += value

    @property
    def current_start_ms(self) -> int:
        """When the current sample started: the rate was last recorded into at most one
        window after it."""
        return self._starts[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self._samples * self._window_ms
        starts = self._starts
        for i in range(self._samples):
            if now_ms - starts[i] >= expire:
                starts[i] = now_ms
                self._values[i] = 0.0

    def window_ms(self, now_ms: int) -> int:
        """The time the samples cover (Kafka's ``Rate.windowSize``), at least 1 ms."""
        self._purge(now_ms)
        return self._window(now_ms)

    def _window(self, now_ms: int) -> int:
        elapsed = now_ms - min(self._starts)
        full_windows = elapsed // self._window_ms
        least = self._samples - 1
        if full_windows < least:
            elapsed += (least - full_windows) * self._window_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        return sum(self._values) * 1000.0 / self._window(now_ms)

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back ``value`` recorded in the current sample (Kafka's fetch quota does, for a
        response it empties because the client is throttled)."""
        self.record(-value, now_ms)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's ``QuotaUtils.throttleTime``: ``round((rate - bound) / bound * window_ms)``."""
    # Java's Math.round rounds half up (floor(x + 0.5)), Python's round half to even.
    return math.floor((rate - bound) / bound * window_ms + 0.5)
