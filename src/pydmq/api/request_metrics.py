"""Request counts and latency histograms per API key, as plain ints (Kafka's RequestMetrics).

Recorded by the dispatcher on every request, so kept to a bisect and three increments; read
(and turned into Prometheus histograms) only when ``/metrics`` is scraped
(:mod:`pydmq.metrics`). Kafka's split of a request's time, in pydmq's terms:

- ``queue``: how long the request waited on its connection behind an earlier one still being
  answered (Kafka's RequestQueueTimeMs; 0 for a request dispatched as it arrived);
- ``local``: decoding, the handler's synchronous work and encoding (LocalTimeMs);
- ``remote``: the wait of an asynchronous handler (acks=all, a long-poll fetch, a forwarded
  admin request) until its answer is encoded (RemoteTimeMs);
- ``total``: the three together (TotalTimeMs). Kafka's send time (writing the answer) is not
  separate: the answer is handed to the transport's buffer, which returns at once.
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["BUCKETS", "ApiRequestMetrics", "LatencyHistogram", "RequestMetrics"]

# Upper bounds (seconds) of the latency buckets; a last bucket takes what is above them.
BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class LatencyHistogram:
    """Counts per bucket of :data:`BUCKETS` (not cumulative; the last one is +Inf) and the sum
    of what was observed. Owned by the event loop."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)


class ApiRequestMetrics:
    """One API key's requests: a histogram per phase (see the module docstring)."""

    __slots__ = ("local", "queue", "remote", "total")

    def __init__(self) -> None:
        self.queue = LatencyHistogram()
        self.local = LatencyHistogram()
        self.remote = LatencyHistogram()
        self.total = LatencyHistogram()


class RequestMetrics:
    """The requests one dispatcher answered, per API key. Owned by the event loop."""

    __slots__ = ("by_api",)

    def __init__(self) -> None:
        self.by_api: dict[int, ApiRequestMetrics] = {}

    def record(self, api_key: int, queue: float, local: float, remote: float) -> None:
        metrics = self.by_api.get(api_key)
        if metrics is None:
            metrics = self.by_api[api_key] = ApiRequestMetrics()
        metrics.local.observe(local)
        metrics.total.observe(queue + local + remote)
        # Most requests neither wait in the backlog nor for anything remote: a zero goes in
        # the first bucket without a search.
        if queue:
            metrics.queue.observe(queue)
        else:
            metrics.queue.counts[0] += 1
        if remote:
            metrics.remote.observe(remote)
        else:
            metrics.remote.counts[0] += 1
