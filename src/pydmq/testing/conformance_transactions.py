"""The transactions part of the engine conformance suite (mixed into
:class:`~pydmq.testing.conformance.StorageEngineConformance`).

The engine's side of the aborted-transaction index (:mod:`pydmq.storage.api`): entries
recorded with ``append_aborted_txn`` come back from ``collect_aborted_txns`` by Kafka's overlap
rule, in marker order; they go with their marker (truncation, a full truncation, deleted
segments) and, on a persistent engine, survive a reopen. Then the same rules through the
engine-agnostic :class:`~pydmq.storage.log.UnifiedLog` over the engine: transactional batches
and markers move the last stable offset, an ABORT records its entry, and a log reopened with
a transaction open keeps its last stable offset and its aborted transactions. On an engine
with the compaction port, the real cleaner drops the records of aborted transactions (an
aborted value never replaces a committed one) and keeps the markers.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import (
    AbortedTxn,
    CompactableLog,
    LogConfig,
    PartitionLog,
    StorageEngine,
    TopicPartition,
)
from pydmq.storage.log import AppendPolicy, UnifiedLog

__all__ = ["TransactionConformance", "transactional_batch"]

TP = TopicPartition("transactions", 0)
BASE_TS = 1_700_000_000_000
_POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**62,
)


def transactional_batch(
    producer_id: int, epoch: int, sequence: int, count: int = 1, key: bytes = b"k"
) -> bytes:
    """A client's transactional batch of ``count`` records (offsets assigned on append)."""
    return build_batch(
        [SimpleRecord(key, b"v%d" % i, timestamp=BASE_TS) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )


class TransactionConformance:
    """Transaction tests; the host class provides ``make_engine`` and the ``engine`` fixture."""

    persistent: ClassVar[bool] = True

    def make_engine(self, data_dir: str) -> StorageEngine:
        raise NotImplementedError

    # -- the engine's index ----------------------------------------------------------------

    def _marked_log(self, engine: StorageEngine, **config: int) -> PartitionLog:
        """Eight one-record batches; entries recorded after the markers at 2, 5 and 7."""
        log = engine.open_log(TP, LogConfig(**config))  # type: ignore[arg-type]
        for offset in range(8):
            batch = build_batch([SimpleRecord(None, b"v", timestamp=1_000)], base_offset=offset)
            log.append(batch, list(iter_batch_headers(batch)))
            if offset == 2:
                log.append_aborted_txn(AbortedTxn(7, 0, 2, 3))
            elif offset == 5:
                log.append_aborted_txn(AbortedTxn(8, 1, 5, 3))
            elif offset == 7:
                log.append_aborted_txn(AbortedTxn(7, 6, 7, 8))
        return log

    def test_aborted_txns_overlap_rule(self, engine: StorageEngine) -> None:
        log = self._marked_log(engine)
        assert log.collect_aborted_txns(0, 100) == [
            AbortedTxn(7, 0, 2, 3),
            AbortedTxn(8, 1, 5, 3),
            AbortedTxn(7, 6, 7, 8),
        ]
        # last_offset >= start and first_offset < upper bound
        assert log.collect_aborted_txns(3, 6) == [AbortedTxn(8, 1, 5, 3)]
        assert log.collect_aborted_txns(0, 1) == [AbortedTxn(7, 0, 2, 3)]
        assert log.collect_aborted_txns(6, 7) == [AbortedTxn(7, 6, 7, 8)]
        assert log.collect_aborted_txns(8, 100) == []

    def test_aborted_txns_go_with_their_marker_on_truncation(self, engine: StorageEngine) -> None:
        log = self._marked_log(engine)
        log.truncate_to(5)
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(7, 0, 2, 3)]
        log.truncate_fully_and_start_at(20)
        assert log.collect_aborted_txns(0, 100) == []

    def test_aborted_txns_of_deleted_segments_go(self, engine: StorageEngine) -> None:
        log = self._marked_log(engine, segment_bytes=1)  # one batch per segment
        log.maybe_increment_log_start_offset(4)  # deletes the segments of offsets 0-3
        assert log.collect_aborted_txns(0, 100) == [
            AbortedTxn(8, 1, 5, 3),
            AbortedTxn(7, 6, 7, 8),
        ]

    def test_the_cleaner_removes_aborted_txns(self, engine: StorageEngine) -> None:
        log = self._marked_log(engine)
        log.remove_aborted_txns([5, 6])  # 6 is no marker: nothing to remove for it
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(7, 0, 2, 3), AbortedTxn(7, 6, 7, 8)]

    def test_aborted_txns_survive_a_reopen(self, data_dir: str) -> None:
        if not self.persistent:
            return
        engine = self.make_engine(data_dir)
        log = self._marked_log(engine)
        log.truncate_to(7)
        log.remove_aborted_txns([2])
        engine.close()
        engine = self.make_engine(data_dir)
        try:
            log = engine.open_log(TP, LogConfig())
            assert log.collect_aborted_txns(0, 100) == [AbortedTxn(8, 1, 5, 3)]
        finally:
            engine.close()

    # -- through UnifiedLog ----------------------------------------------------------------

    def _unified(self, engine: StorageEngine) -> UnifiedLog:
        return UnifiedLog(engine.open_log(TP, LogConfig()))

    @staticmethod
    def _produce(log: UnifiedLog, data: bytes) -> int:
        info = log.append_as_leader(memoryview(bytearray(data)), 0, _POLICY)
        log.update_high_watermark(log.log_end_offset)
        return info.first_offset

    def test_last_stable_offset_follows_transactions(self, engine: StorageEngine) -> None:
        log = self._unified(engine)
        self._produce(log, build_batch([SimpleRecord(b"k", b"plain")]))
        first = self._produce(log, transactional_batch(1, 0, 0, count=2))
        assert (first, log.high_watermark, log.last_stable_offset) == (1, 3, 1)
        self._produce(log, transactional_batch(2, 0, 0))  # a second open transaction
        self._produce(log, transactional_batch(1, 0, 2))  # the same transaction goes on
        assert log.last_stable_offset == 1
        log.append_marker_as_leader(1, 0, 5, commit=False, leader_epoch=0)
        # the marker is not replicated yet: producer 1's transaction is still unstable
        assert log.last_stable_offset == 1
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == 3  # producer 2's transaction
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(1, 1, 5, 3)]
        log.append_marker_as_leader(2, 0, 5, commit=True, leader_epoch=0)
        log.update_high_watermark(log.log_end_offset)
        assert log.last_stable_offset == log.high_watermark == 7
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(1, 1, 5, 3)]

    def test_a_reopened_log_keeps_open_transactions_and_aborts(self, data_dir: str) -> None:
        if not self.persistent:
            return
        engine = self.make_engine(data_dir)
        log = self._unified(engine)
        self._produce(log, transactional_batch(1, 0, 0))
        log.append_marker_as_leader(1, 0, 0, commit=False, leader_epoch=0)
        self._produce(log, transactional_batch(2, 0, 0))
        log.update_high_watermark(log.log_end_offset)
        log.checkpoint_high_watermark()
        log.take_producer_snapshot()
        self._produce(log, transactional_batch(3, 0, 0))  # after the snapshot: replayed
        log.update_high_watermark(log.log_end_offset)
        log.checkpoint_high_watermark()
        log.engine_log.flush()
        engine.close()
        engine = self.make_engine(data_dir)
        try:
            log = self._unified(engine)
            assert (log.high_watermark, log.last_stable_offset) == (4, 2)
            assert log.collect_aborted_txns(0, 100) == [AbortedTxn(1, 0, 1, 2)]
        finally:
            engine.close()

    def test_cleaning_drops_aborted_records_then_markers(self, engine: StorageEngine) -> None:
        """Kafka's passes: the aborted records go first (the marker and the index entry stay
        while any batch of the transaction was seen), then the entry, then the marker, past
        its delete horizon; a committed transaction's marker stays while its records do."""
        from pydmq.testing.conformance_compaction import read_all_records, run_cleaning

        engine_log = engine.open_log(TP, LogConfig(compact=True, segment_bytes=1, retention_ms=-1))
        if not isinstance(engine_log, CompactableLog):
            pytest.skip("the engine's logs do not implement CompactableLog")
        log = UnifiedLog(engine_log)
        self._produce(log, transactional_batch(1, 0, 0, key=b"k1"))  # 0, committed
        self._produce(log, transactional_batch(1, 0, 1, key=b"k2"))  # 1, committed
        log.append_marker_as_leader(1, 0, 0, commit=True, leader_epoch=0)  # 2
        self._produce(log, transactional_batch(2, 0, 0, key=b"k1"))  # 3, aborted
        log.append_marker_as_leader(2, 0, 0, commit=False, leader_epoch=0)  # 4
        self._produce(log, build_batch([SimpleRecord(b"k3", b"v", timestamp=BASE_TS)]))  # 5

        def clean(now_ms: int, *more: bytes) -> list[int]:
            for data in more:  # new dirty records (the last batch is the active segment)
                self._produce(log, data)
            log.take_producer_snapshot()
            assert run_cleaning(engine_log, now_ms, delete_retention_ms=1_000).end_offset > 0
            return [offset for offset, _, _ in read_all_records(engine_log)]

        # k1's aborted value goes (producer 2's last batch stays, empty); k1=v0 stays
        assert clean(BASE_TS) == [0, 1, 2, 4, 5]
        assert engine_log.collect_aborted_txns(0, 100) == [AbortedTxn(2, 3, 4, 5)]
        idempotent = build_batch(
            [SimpleRecord(b"k4", b"v", timestamp=BASE_TS)],
            producer_id=2,
            producer_epoch=0,
            base_sequence=1,
        )
        plain = [build_batch([SimpleRecord(b"k%d" % i, b"v", timestamp=BASE_TS)]) for i in (5, 6)]
        # producer 2 wrote again: its empty batch goes, seen one last time
        assert clean(BASE_TS, idempotent, plain[0]) == [0, 1, 2, 4, 5, 6, 7]
        assert engine_log.collect_aborted_txns(0, 100) == [AbortedTxn(2, 3, 4, 5)]
        # nothing of the aborted transaction is left: its entry goes, its marker gets a horizon
        assert clean(BASE_TS, plain[1]) == [0, 1, 2, 4, 5, 6, 7, 8]
        assert engine_log.collect_aborted_txns(0, 100) == []
        later = build_batch([SimpleRecord(b"k7", b"v", timestamp=BASE_TS)])
        assert clean(BASE_TS + 999, later) == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # before the horizon
        last = build_batch([SimpleRecord(b"k8", b"v", timestamp=BASE_TS)])
        assert clean(BASE_TS + 1_000, last) == [0, 1, 2, 5, 6, 7, 8, 9, 10]  # the marker went
