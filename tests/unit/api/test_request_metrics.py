"""RequestMetrics: bucket boundaries as Prometheus reads them (a value equal to a bound is in
that bound's bucket) and the phases adding up to the total."""

from __future__ import annotations

from pydmq.api.request_metrics import BUCKETS, LatencyHistogram, RequestMetrics


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    histogram = LatencyHistogram()
    histogram.observe(BUCKETS[0])
    histogram.observe(BUCKETS[3] + 1e-9)
    histogram.observe(BUCKETS[-1] * 10)
    assert histogram.counts[0] == 1
    assert histogram.counts[4] == 1
    assert histogram.counts[-1] == 1  # above every bound: +Inf only
    assert histogram.count == 3


def test_phases_and_total() -> None:
    metrics = RequestMetrics()
    metrics.record(0, queue=0.001, local=0.002, remote=0.5)
    metrics.record(0, queue=0.0, local=0.003, remote=0.0)
    produce = metrics.by_api[0]
    assert produce.total.count == 2
    assert abs(produce.total.sum - 0.506) < 1e-9
    assert abs(produce.remote.sum - 0.5) < 1e-9
    assert set(metrics.by_api) == {0}
