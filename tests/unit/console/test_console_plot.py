"""The console's sampler (rates and series from registry reads kept in a ring buffer) and its
SVG lag plot, without a broker: a scripted clock and metric families."""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pydmq.console.html import Markup, text
from pydmq.console.sampler import GROUP_LAG, LOG_END_OFFSET, LOG_SIZE, MESSAGES_IN, MetricsSampler
from pydmq.console.svg import line_chart


class Registry:
    """Metric families whose values the test sets; a clock the test moves."""

    def __init__(self) -> None:
        self.records = 0.0
        self.lag = {"0": 0.0, "1": 0.0}
        self.now = 100.0

    def collect(self) -> Iterable[Metric]:
        records = CounterMetricFamily(MESSAGES_IN, "", labels=["topic"])
        records.add_metric(["orders"], self.records)
        lag = GaugeMetricFamily(GROUP_LAG, "", labels=["group", "topic", "partition"])
        for partition, value in self.lag.items():
            lag.add_metric(["<g>", "orders", partition], value)
            lag.add_metric(["other", "orders", partition], 99)
        ignored = GaugeMetricFamily("pydmq_unrelated", "", value=1)
        return [records, lag, ignored]


def test_rate_over_the_window_and_ring_buffer_bound() -> None:
    registry = Registry()
    sampler = MetricsSampler(registry.collect, 5.0, keep=4, clock=lambda: registry.now)
    labels = (("topic", "orders"),)
    assert sampler.rate(MESSAGES_IN, labels, sampler.now(), 60) is None  # no history yet
    for _ in range(6):
        sampler.sample()
        registry.now += 5
        registry.records += 50
    assert len(sampler.samples) == 4  # the ring buffer's bound
    assert all("pydmq_unrelated" not in s.values for s in sampler.samples)
    now = sampler.now()  # 30 s after the first sample; the oldest kept is 15 s before now
    assert sampler.rate(MESSAGES_IN, labels, now, 60) == 10.0
    assert sampler.rate(MESSAGES_IN, labels, now, 7) == 10.0  # only the newest sample fits
    assert sampler.rate(MESSAGES_IN, (("topic", "none"),), now, 60) is None
    assert sampler.span(now.at) == 15.0


def test_the_kept_samples_hold_no_per_partition_log_families() -> None:
    """Issue 21: every kept sample held the log size and log end offset of every hosted
    partition (121 samples by default: ~1 GiB at 20,000 partitions); only ``now()``, a
    topic's page, reads them."""
    registry = Registry()

    def collect() -> Iterable[Metric]:
        size = GaugeMetricFamily(LOG_SIZE, "", labels=["topic", "partition"])
        end = GaugeMetricFamily(LOG_END_OFFSET, "", labels=["topic", "partition"])
        for partition in range(100):
            size.add_metric(["orders", str(partition)], 10.0)
            end.add_metric(["orders", str(partition)], 1.0)
        return [*registry.collect(), size, end]

    sampler = MetricsSampler(collect, 5.0, keep=4, clock=lambda: registry.now)
    taken = sampler.sample()
    assert len(taken.family(LOG_SIZE)) == len(taken.family(LOG_END_OFFSET)) == 100
    (kept,) = sampler.samples
    assert kept.family(LOG_SIZE) == {} and kept.family(LOG_END_OFFSET) == {}
    assert kept.family(MESSAGES_IN) == taken.family(MESSAGES_IN)
    assert kept.family(GROUP_LAG) == taken.family(GROUP_LAG)
    assert len(sampler.now().family(LOG_SIZE)) == 100


def test_series_of_one_group() -> None:
    registry = Registry()
    sampler = MetricsSampler(registry.collect, 1.0, keep=10, clock=lambda: registry.now)
    for step in range(3):
        registry.lag = {"0": float(step), "1": float(10 * step)}
        sampler.sample()
        registry.now += 1
    series = sampler.series(GROUP_LAG, (("group", "<g>"),))
    assert series == {
        (("partition", "0"), ("topic", "orders")): [(100.0, 0.0), (101.0, 1.0), (102.0, 2.0)],
        (("partition", "1"), ("topic", "orders")): [(100.0, 0.0), (101.0, 10.0), (102.0, 20.0)],
    }


def test_line_chart_draws_escaped_series() -> None:
    svg = line_chart(
        {"<b>-0": [(0.0, 0.0), (30.0, 40.0), (60.0, 20.0)], "t-1": [(0.0, 5.0)]},
        now=60.0,
        span_s=60.0,
        css_id="plot",
    )
    assert isinstance(svg, Markup)
    assert "<b>" not in svg and "&lt;b&gt;-0" in svg
    lines = re.findall(r'<polyline class="series" points="([^"]+)"', svg)
    assert len(lines) == 2
    points = [tuple(map(float, p.split(","))) for p in lines[0].split()]
    assert points[0][0] < points[1][0] < points[2][0]  # later samples to the right
    assert points[1][1] < points[2][1] < points[0][1]  # higher lag higher up (SVG y down)
    assert ">50<" in svg  # the y axis's top: 1, 2 or 5 times a power of ten above 40
    assert "no samples yet" in line_chart({}, 0.0, 10.0, "empty")


def test_markup_escapes_what_is_added() -> None:
    assert text("<a href='x'>") == "&lt;a href=&#x27;x&#x27;&gt;"
    assert Markup("<p>") + "<i>" == "<p>&lt;i&gt;"
    assert Markup("<p>") + Markup("<i>") == "<p><i>"
    assert text(None) == "&#8212;"
