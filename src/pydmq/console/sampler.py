"""MetricsSampler: the node's metrics registry read every few seconds into a ring buffer, for
the console's rates (records and bytes per second per topic) and its lag plot.

Only the families the console shows are read (see ``SAMPLED``), each sample as
``{family: {labels: value}}``, and only those it computes rates and plots from are kept
(``KEPT``). Reading the registry is what a ``/metrics`` scrape does (on the
node's event loop); the first sample is taken one interval after start, so start-up never
pays prometheus_client's import.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

__all__ = [
    "BYTES_IN",
    "BYTES_OUT",
    "GROUP_LAG",
    "LOG_END_OFFSET",
    "LOG_SIZE",
    "MESSAGES_IN",
    "MetricsSample",
    "MetricsSampler",
    "read_families",
]

log = logging.getLogger(__name__)

MESSAGES_IN = "pydmq_broker_messages_in"  # {topic}
BYTES_IN = "pydmq_broker_bytes_in"  # {topic}
BYTES_OUT = "pydmq_broker_bytes_out"  # {topic}
GROUP_LAG = "pydmq_consumer_group_lag"  # {group, topic, partition}
LOG_SIZE = "pydmq_log_size_bytes"  # {topic, partition}
LOG_END_OFFSET = "pydmq_log_end_offset"  # {topic, partition}
SAMPLED = frozenset({MESSAGES_IN, BYTES_IN, BYTES_OUT, GROUP_LAG, LOG_SIZE, LOG_END_OFFSET})
KEPT = frozenset({MESSAGES_IN, BYTES_IN, BYTES_OUT, GROUP_LAG})
"""The families the ring buffer keeps: the rates' counters and the lag plot's series. The
per-partition log families are read by :meth:`MetricsSampler.now` alone (a topic's page):
kept, they held two entries per hosted partition in each of the ``history / interval``
samples (issue 21: ~1 GiB at 20,000 partitions after the default 10 minutes)."""

Labels = tuple[tuple[str, str], ...]
Collect = Callable[[], "Iterable[Metric]"]


@dataclass(frozen=True, slots=True)
class MetricsSample:
    """The sampled families at one moment (``at``: monotonic seconds)."""

    at: float
    values: dict[str, dict[Labels, float]]

    def family(self, name: str) -> dict[Labels, float]:
        return self.values.get(name, {})


def read_families(collect: Collect, at: float) -> MetricsSample:
    """The sampled families of one registry read."""
    values: dict[str, dict[Labels, float]] = {}
    for family in collect():
        if family.name not in SAMPLED:
            continue
        into = values.setdefault(family.name, {})
        for sample in family.samples:
            into[tuple(sorted(sample.labels.items()))] = float(sample.value)
    return MetricsSample(at, values)


class MetricsSampler:
    """Keeps the last ``keep`` samples, one every ``interval_s``. Owned by the node's HTTP
    service; its task and every reader run on the node's event loop."""

    def __init__(
        self,
        collect: Collect,
        interval_s: float,
        keep: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._collect = collect
        self.interval_s = interval_s
        self._clock = clock
        self.samples: deque[MetricsSample] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None

    def now(self) -> MetricsSample:
        """A sample read now (not kept)."""
        return read_families(self._collect, self._clock())

    def sample(self) -> MetricsSample:
        """Read the registry and keep the sample's :data:`KEPT` families."""
        taken = self.now()
        kept = {name: values for name, values in taken.values.items() if name in KEPT}
        self.samples.append(MetricsSample(taken.at, kept))
        return taken

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.sample()
            except Exception:
                log.exception("the console's metrics sample failed")

    def span(self, now: float) -> float:
        """The seconds the kept samples reach back from ``now`` (the plot's width): at least
        two intervals, at most the ring buffer's length."""
        kept = self.interval_s * ((self.samples.maxlen or 2) - 1)
        reach = now - self.samples[0].at if self.samples else 0.0
        return max(2 * self.interval_s, min(kept, reach))

    def rate(
        self, name: str, labels: Labels, current: MetricsSample, over_s: float
    ) -> float | None:
        """Per-second increase of counter ``name{labels}`` from the oldest kept sample within
        ``over_s`` before ``current`` to ``current``; None without such a sample."""
        value = current.family(name).get(labels)
        if value is None:
            return None
        for earlier in self.samples:
            elapsed = current.at - earlier.at
            if elapsed <= 0 or elapsed > over_s:
                continue
            before = earlier.family(name).get(labels, 0.0)
            return max(0.0, value - before) / elapsed
        return None

    def series(self, name: str, match: Labels) -> dict[Labels, list[tuple[float, float]]]:
        """Each ``name`` series whose labels include ``match``: its (at, value) points over
        the kept samples, keyed by its other labels."""
        wanted = set(match)
        out: dict[Labels, list[tuple[float, float]]] = {}
        for taken in self.samples:
            for labels, value in taken.family(name).items():
                if wanted <= set(labels):
                    rest = tuple(kv for kv in labels if kv not in wanted)
                    out.setdefault(rest, []).append((taken.at, value))
        return out
