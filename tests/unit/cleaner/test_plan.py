"""plan_cleaning: the dirty section's bounds and ratio (KIP-58 and KIP-354 included)."""

from __future__ import annotations

import dataclasses

import pytest

from pydmq.cleaner.log_cleaner import group_segments_by_size, plan_cleaning
from pydmq.engines.memory import MemoryLog
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig, SegmentInfo, TopicPartition
from pydmq.storage.log import UnifiedLog

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("plan", 0)
TS = 1_700_000_000_000


def log_of(count: int, *, hw: int | None = None, **config: object) -> UnifiedLog:
    """``count`` one-record batches (memory engine: each is a segment), timestamps TS + offset."""
    engine_log = MemoryLog(dataclasses.replace(LogConfig(compact=True), **config), TP)  # type: ignore[arg-type]
    for offset in range(count):
        data = build_batch([SimpleRecord(b"k", b"v", (), TS + offset)], base_offset=offset)
        engine_log.append(data, list(iter_batch_headers(data)))
    log = UnifiedLog(engine_log)
    log.update_high_watermark(count if hw is None else hw)
    return log


def test_the_dirty_section_stops_at_the_active_segment() -> None:
    plan = plan_cleaning(TP, log_of(10), TS)
    assert plan is not None
    assert (plan.first_dirty, plan.first_uncleanable) == (0, 9)
    assert plan.dirty_ratio == 1.0 and plan.cleanable
    assert [s.base_offset for s in plan.segments] == list(range(9))


def test_the_dirty_section_stops_at_the_high_watermark() -> None:
    plan = plan_cleaning(TP, log_of(10, hw=4), TS)
    assert plan is not None and plan.first_uncleanable == 4


def test_the_checkpoint_starts_the_dirty_section_and_sets_the_ratio() -> None:
    log = log_of(10)
    log.engine_log.write_checkpoint("cleaner-offset", b"6")
    plan = plan_cleaning(TP, log, TS)
    assert plan is not None and plan.first_dirty == 6
    assert plan.dirty_ratio == pytest.approx(3 / 9)
    assert not plan.cleanable  # below min.cleanable.dirty.ratio 0.5
    log.engine_log.write_checkpoint("cleaner-offset", b"99")  # outside the log: from the start
    plan = plan_cleaning(TP, log, TS)
    assert plan is not None and plan.first_dirty == 0


def test_min_compaction_lag_keeps_young_segments_dirty() -> None:
    # Segments whose largest timestamp is within the lag of now are not cleaned (KIP-58).
    plan = plan_cleaning(TP, log_of(10, min_compaction_lag_ms=100), TS + 104)
    assert plan is not None and plan.first_uncleanable == 5


def test_max_compaction_lag_makes_a_log_cleanable_below_the_ratio() -> None:
    log = log_of(10, max_compaction_lag_ms=1000)
    log.engine_log.write_checkpoint("cleaner-offset", b"7")
    plan = plan_cleaning(TP, log, TS + 500)
    assert plan is not None and not plan.cleanable
    plan = plan_cleaning(TP, log, TS + 7 + 1001)  # the first dirty batch is older than the lag
    assert plan is not None and plan.max_lag_exceeded and plan.cleanable


def test_groups_stay_under_the_segment_size() -> None:
    segments = [SegmentInfo(i * 10, i * 10 + 10, 400, TS, TS) for i in range(5)]
    groups = group_segments_by_size(segments, 1000)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20, 30], [40]]
    assert group_segments_by_size(segments[:1], 100) == [segments[:1]]


def test_the_active_segment_rolls_at_max_compaction_lag(tmp_path: object) -> None:
    """KIP-354: a compacted log's active segment rolls once max.compaction.lag.ms passes
    (segment.ms otherwise), so that its records can be cleaned in time."""
    from pydmq.engines.segment import SegmentStorageEngine

    engine = SegmentStorageEngine(str(tmp_path))
    try:
        config = LogConfig(compact=True, segment_ms=10**9, max_compaction_lag_ms=1000)
        assert config.max_segment_ms == 1000
        assert dataclasses.replace(config, compact=False).max_segment_ms == 10**9
        log = engine.open_log(TP, config)
        data = build_batch([SimpleRecord(b"k", b"v", (), TS)], base_offset=0)
        log.append(data, list(iter_batch_headers(data)))
        log.maybe_roll(TS + 1000)
        assert len(log.segments) == 1
        log.maybe_roll(TS + 1001)
        assert len(log.segments) == 2
    finally:
        engine.close()


def test_a_cleaning_planned_before_retention_is_abandoned_quietly() -> None:
    from pydmq.cleaner.log_cleaner import clean_log
    from pydmq.cleaner.offset_map import OffsetMap
    from pydmq.cleaner.throttler import Throttler

    log = log_of(10, retention_ms=5, delete=True)
    plan = plan_cleaning(TP, log, TS)
    assert plan is not None
    assert log.delete_old_segments(TS + 7) > 0  # compact,delete: retention came first
    result = clean_log(plan, lambda fn: fn(), OffsetMap(1 << 16), Throttler(float("inf")), TS)
    assert result.aborted and result.groups_swapped == 0
