"""One cleaning of one log (Kafka's ``Cleaner.clean``): plan it on the thread that owns the log,
read, map and write on a cleaner thread, swap each group of segments back on the owner.

Hand-off: every call into the log (its segments, its producer state, the swap, the cleaner
checkpoint) goes through an :data:`Owner`, which runs it on the event loop that owns the log
and hands the result back; the cleaner thread itself only touches the
:class:`~pydmq.storage.api.SegmentBatches` and :class:`~pydmq.storage.api.CleanedSegment`
objects the log gave it. Truncations, retention and deletion therefore never run concurrently
with a swap, and a swap prepared before one of them is refused by the log (its generation or
its segments changed): the cleaning of that log is then abandoned, as Kafka aborts it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from pydmq.cleaner.cleaning import BatchCleaner, CleaningRules, CleaningStats, OffsetMapBuilder
from pydmq.cleaner.offset_map import OffsetMap
from pydmq.cleaner.throttler import Throttler
from pydmq.storage.api import (
    AbortedTxn,
    CompactableLog,
    LogConfig,
    SegmentBatches,
    SegmentInfo,
    TopicPartition,
)
from pydmq.storage.log import UnifiedLog

__all__ = [
    "CLEANER_CHECKPOINT",
    "CleanerStoppedError",
    "CleaningResult",
    "LogToClean",
    "Owner",
    "clean_log",
    "group_segments_by_size",
    "plan_cleaning",
    "read_cleaner_checkpoint",
]

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset"  # the first dirty offset (Kafka's cleaner-offset-checkpoint)
_MAX_GROUP_OFFSETS = 2**31 - 1  # a segment's relative offsets are int32 in Kafka

T = TypeVar("T")


class CleanerStoppedError(Exception):
    """The cleaner is stopping: the cleaning in progress is abandoned where it is."""


class Owner(Protocol):
    """Runs ``fn`` on the thread that owns the logs and returns its result (or raises)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...


def read_cleaner_checkpoint(log: UnifiedLog) -> int:
    """The first dirty offset recorded by the last cleaning (-1 if none)."""
    data = log.engine_log.read_checkpoint(CLEANER_CHECKPOINT)
    try:
        return int(data) if data else -1
    except ValueError:
        return -1


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log's cleanable state, taken on its owner (Kafka's LogToClean)."""

    tp: TopicPartition
    log: UnifiedLog
    engine: CompactableLog
    config: LogConfig
    generation: int
    first_dirty: int
    first_uncleanable: int
    segments: tuple[SegmentInfo, ...]  # closed segments starting below first_uncleanable
    clean_bytes: int
    dirty_bytes: int
    max_lag_exceeded: bool
    last_offset_of_producer: dict[int, int] = field(default_factory=dict)
    # The log's aborted transactions from its start to first_uncleanable.
    aborted_txns: tuple[AbortedTxn, ...] = ()

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def cleanable(self) -> bool:
        if self.dirty_bytes <= 0:
            return False
        return self.max_lag_exceeded or self.dirty_ratio >= self.config.min_cleanable_dirty_ratio


def plan_cleaning(tp: TopicPartition, log: UnifiedLog, now_ms: int) -> LogToClean | None:
    """Run on the owner. The dirty section runs from the cleaner checkpoint (log start if it
    is outside the log) to the first uncleanable offset: the active segment, the high
    watermark, the first unstable offset (an open transaction), and the first segment newer
    than ``min.compaction.lag.ms``. None if the engine cannot compact. The knobs are the
    engine log's :class:`~pydmq.storage.api.LogConfig`."""
    engine = log.engine_log
    if not isinstance(engine, CompactableLog):
        return None
    config = engine.config
    closed = engine.closed_segments()
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty = read_cleaner_checkpoint(log)
    if not start <= first_dirty <= end:
        first_dirty = start
    bounds = [log.high_watermark, closed[-1].next_offset if closed else start]
    unstable = log.producer_state.first_unstable_offset()
    if unstable is not None:
        bounds.append(unstable)
    if config.min_compaction_lag_ms > 0:
        young = now_ms - config.min_compaction_lag_ms
        bounds += [
            s.base_offset
            for s in closed
            if s.next_offset > first_dirty and s.largest_timestamp > young
        ][:1]
    first_uncleanable = max(first_dirty, min(bounds))
    segments = tuple(s for s in closed if s.base_offset < first_uncleanable)
    clean_bytes = sum(s.size for s in segments if s.next_offset <= first_dirty)
    dirty = [s for s in segments if s.next_offset > first_dirty]
    first_timestamp = next((s.first_timestamp for s in dirty if s.first_timestamp >= 0), -1)
    max_lag_exceeded = 0 <= first_timestamp < now_ms - config.max_compaction_lag_ms
    producers = {
        pid: entry.last_data_offset
        for pid, entry in log.producer_state.producers.items()
        if entry.last_data_offset >= 0
    }
    return LogToClean(
        tp,
        log,
        engine,
        config,
        engine.cleaning_generation,
        first_dirty,
        first_uncleanable,
        segments,
        clean_bytes,
        sum(s.size for s in dirty),
        max_lag_exceeded,
        producers,
        tuple(log.collect_aborted_txns(start, first_uncleanable)),
    )


def group_segments_by_size(
    segments: Sequence[SegmentInfo], max_size: int
) -> list[list[SegmentInfo]]:
    """Adjacent segments in groups whose total size stays within ``max_size`` (at least one
    segment each) and whose offsets span less than 2**31, so cleaned files stay large."""
    groups: list[list[SegmentInfo]] = []
    for segment in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + segment.size <= max_size
            and segment.next_offset - group[0].base_offset <= _MAX_GROUP_OFFSETS
        ):
            group.append(segment)
        else:
            groups.append([segment])
    return groups


@dataclass(slots=True)
class CleaningResult:
    """What one cleaning did: the new first dirty offset (-1 if it was abandoned) and the end
    of the last segment group swapped in (every batch below it was cleaned)."""

    end_offset: int = -1
    cleaned_up_to: int = -1
    groups_swapped: int = 0
    aborted: bool = False
    stats: CleaningStats = field(default_factory=CleaningStats)


def _group_end(group: Sequence[SegmentInfo]) -> int:
    last = group[-1]
    return max(last.next_offset, last.base_offset + 1)


def clean_log(
    plan: LogToClean,
    owner: Owner,
    offset_map: OffsetMap,
    throttler: Throttler,
    now_ms: int,
    stopping: Callable[[], bool] = lambda: False,
) -> CleaningResult:
    """Run on a cleaner thread: map the dirty section, then clean every group of segments
    from the log start to where the map reached, swapping each in on the owner. ``stopping``
    is asked between batches: once true, CleanerStoppedError (nothing swapped is undone)."""
    budget = _Budget(throttler, stopping)
    result = CleaningResult()
    if plan.first_uncleanable <= plan.first_dirty:
        return result  # no dirty section: nothing to do
    try:
        readers: dict[int, SegmentBatches] = owner(lambda: _open_readers(plan))
    except (ValueError, FileNotFoundError):  # retention or a truncation came first
        log.info("%s: cleaning abandoned: the log changed under it", plan.tp)
        result.aborted = True
        return result
    try:
        offset_map.clear()
        builder = OffsetMapBuilder(
            offset_map, plan.first_dirty, plan.first_uncleanable, plan.aborted_txns
        )
        for segment in plan.segments:
            if segment.next_offset <= plan.first_dirty:
                continue
            if not _map_segment(builder, readers[segment.base_offset], budget):
                break
        end = builder.reached
        if end <= plan.first_dirty:
            log.warning(
                "%s: the offset map (%d keys) cannot hold the batch at offset %d: not cleaned",
                plan.tp,
                offset_map.capacity,
                plan.first_dirty,
            )
            result.aborted = True
            return result
        cleaner = BatchCleaner(
            offset_map,
            CleaningRules(
                now_ms,
                plan.config.delete_retention_ms,
                plan.last_offset_of_producer,
                plan.aborted_txns,
                plan.first_uncleanable,
            ),
        )
        result.stats = cleaner.stats
        cleanable = [s for s in plan.segments if s.base_offset < end]
        for group in group_segments_by_size(cleanable, plan.config.segment_bytes):
            if not _clean_group(plan, owner, group, readers, cleaner, budget):
                log.info("%s: cleaning abandoned: the log changed under it", plan.tp)
                result.aborted = True
                return result
            result.groups_swapped += 1
            result.cleaned_up_to = _group_end(group)
        owner(lambda: _write_checkpoint(plan, end))
        result.end_offset = end
        return result
    finally:
        for reader in readers.values():
            reader.close()


class _Budget:
    """Every batch read or written passes through it: the throttler's rate, and
    CleanerStoppedError once ``stopping()`` is true."""

    def __init__(self, inner: Throttler, stopping: Callable[[], bool]) -> None:
        self._inner = inner
        self._stopping = stopping

    def acquire(self, n: int) -> None:
        if self._stopping():
            raise CleanerStoppedError
        self._inner.acquire(n)


def _open_readers(plan: LogToClean) -> dict[int, SegmentBatches]:
    """On the owner: a reader per planned segment (all or none)."""
    readers: dict[int, SegmentBatches] = {}
    try:
        for segment in plan.segments:
            readers[segment.base_offset] = plan.engine.open_segment_batches(segment)
    except BaseException:
        for reader in readers.values():
            reader.close()
        raise
    return readers


def _write_checkpoint(plan: LogToClean, end: int) -> None:
    """Record the new first dirty offset (on the owner)."""
    plan.log.engine_log.write_checkpoint(CLEANER_CHECKPOINT, str(end).encode())


def _map_segment(builder: OffsetMapBuilder, reader: SegmentBatches, budget: _Budget) -> bool:
    """Map one segment's batches; False once the map is full or past the dirty section."""
    for batch in reader.batches():
        budget.acquire(len(batch))
        if not builder.add(batch):
            return False
    return True


def _clean_group(
    plan: LogToClean,
    owner: Owner,
    group: list[SegmentInfo],
    readers: dict[int, SegmentBatches],
    cleaner: BatchCleaner,
    budget: _Budget,
) -> bool:
    """Write the cleaned segment of one group and swap it in; False if the log refused."""
    engine = plan.engine
    cleaned = owner(lambda: engine.new_cleaned_segment(group[0].base_offset, _group_end(group)))
    try:
        for segment in group:
            for batch in readers[segment.base_offset].batches():
                budget.acquire(len(batch))
                kept = cleaner.clean(batch)
                if kept is not None:
                    budget.acquire(len(kept))
                    cleaned.append(kept)
        cleaned.finish()
    except BaseException:
        cleaned.abort()
        raise
    dropped = cleaner.take_dropped_index_entries()
    if dropped:
        # Before the swap that may remove their markers: an entry never outlives its marker
        # (the transactions' records are gone, so dropping them is right even if the swap is
        # refused).
        owner(lambda: plan.log.engine_log.remove_aborted_txns(dropped))
    return owner(lambda: engine.replace_segments(group, cleaned, plan.generation))
