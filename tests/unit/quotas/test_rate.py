"""Kafka's windowed rate and throttle time: the same inputs give Kafka's numbers.

The expected values follow Kafka's ``SampledStat``/``Rate`` (11 samples of 1 s: a sample is
replaced once 1 s old, the rate's window counts at least 10 whole windows) and
``QuotaUtils.throttleTime`` (``round((rate - bound) / bound * window)``), worked by hand
below each case.
"""

from __future__ import annotations

import pytest

from pydmq.quotas.rate import SampledRate, throttle_time_ms

pytestmark = pytest.mark.timeout(30)


def test_ten_seconds_at_400_then_a_burst_of_2500_is_kafkas_3000_ms() -> None:
    # Kafka's ClientQuotaManagerTest (quota 500 B/s): 400 B every second for 10 s, then
    # 2500 B: (4000 + 2500) B over 10 s = 650 B/s; (650 - 500) / 500 * 10000 = 3000 ms.
    rate = SampledRate(11, 1000, 0)
    for second in range(10):
        rate.record(400, second * 1000)
        assert rate.measure(second * 1000) <= 500
    rate.record(2500, 10_000)
    assert rate.measure(10_000) == pytest.approx(650.0)
    assert rate.window_ms(10_000) == 10_000
    assert throttle_time_ms(rate.measure(10_000), 500, rate.window_ms(10_000)) == 3000


def test_a_new_rate_counts_ten_whole_windows() -> None:
    # One record of 2000 at creation: elapsed 0 < 10 whole windows, so the window is 10 s:
    # 200 B/s; against 100 B/s: (200 - 100) / 100 * 10000 = 10000 ms.
    rate = SampledRate(11, 1000, 5_000)
    rate.record(2000, 5_000)
    assert rate.window_ms(5_000) == 10_000
    assert rate.measure(5_000) == pytest.approx(200.0)
    assert throttle_time_ms(200.0, 100.0, 10_000) == 10_000


def test_the_window_grows_past_ten_seconds_with_partial_windows() -> None:
    # Records at 0 and 10500: the oldest sample starts at 0, elapsed 10500 ms (10 whole
    # windows, no padding): 2 * 1000 B / 10.5 s.
    rate = SampledRate(11, 1000, 0)
    rate.record(1000, 0)
    rate.record(1000, 10_500)
    assert rate.window_ms(10_500) == 10_500
    assert rate.measure(10_500) == pytest.approx(2000 / 10.5)


def test_samples_idle_for_eleven_windows_are_reset() -> None:
    rate = SampledRate(11, 1000, 0)
    rate.record(50_000, 0)
    # 11 s later the sample is obsolete: Kafka resets it at the measurement.
    assert rate.measure(11_000) == 0.0
    rate.record(100, 11_000)
    assert rate.measure(11_000) == pytest.approx(10.0)


def test_records_within_one_window_share_a_sample_and_the_ring_wraps() -> None:
    rate = SampledRate(3, 1000, 0)
    rate.record(10, 0)
    rate.record(10, 999)  # same sample
    rate.record(10, 1000)  # next
    rate.record(10, 2000)  # next
    rate.record(10, 3000)  # wraps: replaces the sample started at 0 (20 bytes)
    # samples: [10 @3000, 10 @1000, 10 @2000]; oldest 1000, elapsed 2000 ms = 2 windows
    assert rate.window_ms(3000) == 2000
    assert rate.measure(3000) == pytest.approx(15.0)


def test_unrecord_takes_back_a_value() -> None:
    rate = SampledRate(11, 1000, 0)
    rate.record(3000, 0)
    rate.unrecord(3000, 0)
    assert rate.measure(0) == 0.0


@pytest.mark.parametrize(
    ("rate", "bound", "window", "expected"),
    [
        (650.0, 500.0, 10_000, 3000),
        (100.25, 100.0, 10_000, 25),
        # Java's Math.round rounds half up: 0.5 -> 1, 2.5 -> 3 (Python's round gives 0, 2)
        (1000.5, 1000.0, 1000, 1),
        (1002.5, 1000.0, 1000, 3),
        (1_000_000.0, 100_000.0, 11_000, 99_000),
    ],
)
def test_throttle_time_is_kafkas_formula(
    rate: float, bound: float, window: int, expected: int
) -> None:
    assert throttle_time_ms(rate, bound, window) == expected
