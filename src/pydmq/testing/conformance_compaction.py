"""The compaction part of the engine conformance suite (mixed into
:class:`~pydmq.testing.conformance.StorageEngineConformance`).

An engine whose logs implement :class:`~pydmq.storage.api.CompactableLog` is cleaned by the
real cleaner (:mod:`pydmq.cleaner.log_cleaner`, run inline: the test thread is the owner) over
a seeded workload of updates, tombstones, records without a key and idempotent producer
batches, in several rounds with the clock moving past ``delete.retention.ms``. After every
cleaning a full read must equal the model: each key's latest value (below the offset the
cleaning reached; every record above it), tombstones until their delete horizon has passed,
records without a key, offsets strictly increasing; and the producer state rebuilt from the log
must be the one before the cleaning. Engines without the port skip these tests.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

import pytest

from pydmq.cleaner.log_cleaner import CleaningResult, clean_log, plan_cleaning
from pydmq.cleaner.offset_map import OffsetMap
from pydmq.cleaner.throttler import Throttler
from pydmq.producers.state import ProducerStateManager
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.storage.api import CompactableLog, LogConfig, PartitionLog, StorageEngine, TopicPartition
from pydmq.storage.log import UnifiedLog

__all__ = ["CompactionConformance", "CompactionModel", "read_all_records", "run_cleaning"]

TP = TopicPartition("compaction", 0)
BASE_TS = 1_700_000_000_000
RETENTION_MS = 60_000
SEGMENT_BYTES = 1500

Row = tuple[int, bytes | None, bytes | None]  # offset, key, value


def read_all_records(log: PartitionLog) -> list[Row]:
    """Every record from log start to log end, across the offset gaps; checks CRCs and that
    offsets strictly increase."""
    rows: list[Row] = []
    offset = log.log_start_offset
    end = log.log_end_offset
    last = -1
    while offset < end:
        info = log.read(offset, 1 << 20, end, True)
        if not info.buffers:
            break
        data = b"".join(bytes(b) for b in info.buffers)
        for header in iter_batch_headers(data):
            validate_crc(data, header)
            assert header.base_offset > last, f"batch at {header.base_offset} after {last}"
            for record in decode_records(data, header):
                assert record.offset > last, f"offset {record.offset} after {last}"
                last = record.offset
                rows.append((record.offset, record.key, record.value))
            last = max(last, header.last_offset)
            offset = header.next_offset
    return rows


def producer_summary(log: PartitionLog) -> dict[int, tuple[int, int, int]]:
    """producer id -> (epoch, last sequence, last offset), replayed from the log."""
    state = ProducerStateManager()
    state.rebuild_from(log.batch_headers(log.log_start_offset))
    return {
        pid: (entry.producer_epoch, entry.last_seq, entry.last_data_offset)
        for pid, entry in state.producers.items()
    }


def run_cleaning(log: PartitionLog, now_ms: int, **config: object) -> CleaningResult:
    """One cleaning of ``log`` by the real cleaner, inline (this thread owns the log), with
    ``config`` replacing fields of the log's LogConfig (``compact=True`` always)."""
    assert isinstance(log, CompactableLog)
    log.config = dataclasses.replace(log.config, compact=True, **config)  # type: ignore[misc,arg-type]
    unified = UnifiedLog(log)
    unified.update_high_watermark(log.log_end_offset)
    plan = plan_cleaning(TP, unified, now_ms)
    assert plan is not None
    return clean_log(plan, lambda fn: fn(), OffsetMap(1 << 20), Throttler(float("inf")), now_ms)


@dataclass
class CompactionModel:
    """The records a compacted log must hold: what was appended, minus what cleanings may
    remove (``horizons``: the delete horizon each kept tombstone got, by offset)."""

    rows: list[Row] = field(default_factory=list)
    horizons: dict[int, int] = field(default_factory=dict)

    def cleaned(self, result: CleaningResult, now_ms: int) -> None:
        end, cleaned_up_to = result.end_offset, result.cleaned_up_to
        latest: dict[bytes, int] = {}
        for offset, key, _ in self.rows:
            if key is not None and offset < end:
                latest[key] = offset
        kept: list[Row] = []
        for row in self.rows:
            offset, key, value = row
            if offset < cleaned_up_to and key is not None:
                if offset < end and latest[key] != offset:
                    continue
                if value is None:
                    horizon = self.horizons.get(offset)
                    if horizon is not None and now_ms >= horizon:
                        del self.horizons[offset]
                        continue
                    self.horizons.setdefault(offset, now_ms + RETENTION_MS)
            kept.append(row)
        self.rows = kept


class CompactionConformance:
    """Compaction tests; the host class provides ``make_engine`` and the ``engine`` fixture."""

    def _compactable(self, engine: StorageEngine) -> PartitionLog:
        log = engine.open_log(TP, LogConfig(segment_bytes=SEGMENT_BYTES, retention_ms=-1))
        if not isinstance(log, CompactableLog):
            pytest.skip("the engine's logs do not implement CompactableLog")
        return log

    @staticmethod
    def _workload(rng: random.Random, log: PartitionLog, model: CompactionModel) -> None:
        sequences: dict[int, int] = {}
        for _ in range(60):
            base = log.log_end_offset
            count = rng.randint(1, 4)
            records = []
            for i in range(count):
                roll = rng.random()
                key = None if roll < 0.05 else b"k%d" % rng.randrange(12)
                value = None if key is not None and roll < 0.15 else b"v%d" % (base + i)
                records.append(SimpleRecord(key, value, (), BASE_TS + base + i))
                model.rows.append((base + i, key, value))
            pid = rng.choice([-1, -1, 7, 8])
            sequence = sequences.get(pid, 0)
            batch = build_batch(
                records,
                base_offset=base,
                compression=rng.choice([0, 0, 1, 4]),
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=sequence if pid >= 0 else -1,
            )
            sequences[pid] = sequence + count
            log.append(batch, list(iter_batch_headers(batch)))
        # The last batch is the active "segment" wherever the engine cuts: one record more.
        tail = build_batch(
            [SimpleRecord(b"tail", b"x", (), BASE_TS)], base_offset=log.log_end_offset
        )
        model.rows.append((log.log_end_offset, b"tail", b"x"))
        log.append(tail, list(iter_batch_headers(tail)))

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_compaction_matches_the_model(self, engine: StorageEngine, seed: int) -> None:
        log = self._compactable(engine)
        rng = random.Random(seed)
        model = CompactionModel()
        now = BASE_TS
        size_before = 0
        for _ in range(3):
            self._workload(rng, log, model)
            producers = producer_summary(log)
            size_before = log.size_in_bytes
            result = run_cleaning(log, now, delete_retention_ms=RETENTION_MS)
            assert result.end_offset > 0 and not result.aborted, result
            model.cleaned(result, now)
            assert read_all_records(log) == model.rows
            assert producer_summary(log) == producers
            now += RETENTION_MS  # the next round passes the horizons this one set
        assert log.size_in_bytes < size_before

    def test_a_swap_prepared_before_a_truncation_is_refused(self, engine: StorageEngine) -> None:
        log = self._compactable(engine)
        model = CompactionModel()
        self._workload(random.Random(4), log, model)
        unified = UnifiedLog(log)
        unified.update_high_watermark(log.log_end_offset)
        assert isinstance(log, CompactableLog)
        plan = plan_cleaning(TP, unified, BASE_TS)
        assert plan is not None and plan.segments
        first = plan.segments[0]
        cleaned = log.new_cleaned_segment(first.base_offset, first.next_offset)
        for batch in log.open_segment_batches(first).batches():
            cleaned.append(batch)
        cleaned.finish()
        log.truncate_to(plan.segments[-1].base_offset)
        assert not log.replace_segments([first], cleaned, plan.generation)
        assert read_all_records(log) == [r for r in model.rows if r[0] < log.log_end_offset]

    def test_reads_taken_before_a_swap_keep_their_bytes(self, engine: StorageEngine) -> None:
        log = self._compactable(engine)
        self._workload(random.Random(5), log, CompactionModel())
        before = log.read(0, 1 << 20, log.log_end_offset, True)
        copies = [bytes(b) for b in before.buffers]
        result = run_cleaning(log, BASE_TS)
        assert result.groups_swapped > 0
        assert [bytes(b) for b in before.buffers] == copies
        assert read_all_records(log) != []

    def test_cleaned_segments_survive_a_reopen(self, data_dir: str) -> None:
        engine = self.make_engine(data_dir)  # type: ignore[attr-defined]
        try:
            log = self._compactable(engine)
            model = CompactionModel()
            self._workload(random.Random(6), log, model)
            result = run_cleaning(log, BASE_TS)
            model.cleaned(result, BASE_TS)
            log.flush()
        finally:
            engine.close()
        if not getattr(self, "persistent", True):
            return
        engine = self.make_engine(data_dir)  # type: ignore[attr-defined]
        try:
            log = engine.open_log(TP, LogConfig(segment_bytes=SEGMENT_BYTES, retention_ms=-1))
            assert read_all_records(log) == model.rows
        finally:
            engine.close()
