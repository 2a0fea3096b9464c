"""UnifiedLog's transactions: markers on the leader and followers, fencing, the last stable
offset after truncation, and the aborted-transaction index of the segment engine across a
crash (a torn entry, a lost index, a lost producer snapshot)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pydmq.engines.memory import MemoryLog
from pydmq.engines.segment import SegmentStorageEngine
from pydmq.engines.segment.txn_index import TXN_INDEX_FILE
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import AbortedTxn, LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, LogAppendError, UnifiedLog
from pydmq.testing.conformance_transactions import transactional_batch

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("txn", 0)
POLICY = AppendPolicy(1 << 20, False, 2**62, 2**62, 2**62)


def produce(log: UnifiedLog, data: bytes) -> int:
    info = log.append_as_leader(memoryview(bytearray(data)), 0, POLICY)
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def leader_with_aborted_and_open_txn() -> UnifiedLog:
    """Offsets: 0-1 producer 1 (aborted by the marker at 2), 3 producer 2 (open)."""
    log = UnifiedLog(MemoryLog(LogConfig()))
    produce(log, transactional_batch(1, 0, 0, count=2))
    log.append_marker_as_leader(1, 0, 3, commit=False, leader_epoch=0)
    produce(log, transactional_batch(2, 0, 0))
    log.update_high_watermark(log.log_end_offset)
    return log


def all_bytes(log: UnifiedLog) -> bytes:
    info = log.read(log.log_start_offset, 1 << 20, log.log_end_offset, True)
    return b"".join(bytes(b) for b in info.buffers)


def test_a_follower_learns_markers_aborts_and_open_transactions() -> None:
    leader = leader_with_aborted_and_open_txn()
    follower = UnifiedLog(MemoryLog(LogConfig()))
    follower.append_as_follower(all_bytes(leader))
    follower.update_high_watermark(leader.high_watermark)
    assert follower.collect_aborted_txns(0, 100) == [AbortedTxn(1, 0, 2, 3)]
    assert follower.last_stable_offset == leader.last_stable_offset == 3
    entry = follower.producer_state.last_entry(1)
    assert entry is not None and entry.coordinator_epoch == 3


def test_fenced_markers_append_nothing() -> None:
    log = leader_with_aborted_and_open_txn()
    produce(log, transactional_batch(1, 2, 0))  # producer 1 bumped its epoch to 2
    end = log.log_end_offset
    with pytest.raises(LogAppendError) as older_epoch:
        log.append_marker_as_leader(1, 1, 3, commit=True, leader_epoch=0)
    assert older_epoch.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(LogAppendError) as older_coordinator:
        log.append_marker_as_leader(1, 2, 2, commit=True, leader_epoch=0)
    assert older_coordinator.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.log_end_offset == end
    log.append_marker_as_leader(1, 2, 3, commit=True, leader_epoch=0)
    assert log.log_end_offset == end + 1


def test_a_non_transactional_batch_inside_an_open_transaction_is_refused() -> None:
    log = leader_with_aborted_and_open_txn()
    plain = build_batch(
        [SimpleRecord(None, b"v")], producer_id=2, producer_epoch=0, base_sequence=1
    )
    with pytest.raises(LogAppendError) as refused:
        produce(log, plain)
    assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE


def test_truncating_a_marker_reopens_its_transaction() -> None:
    log = leader_with_aborted_and_open_txn()
    log.truncate_to(2)  # a follower's diverging tail: the ABORT marker goes
    assert log.collect_aborted_txns(0, 100) == []
    assert log.last_stable_offset == 0  # producer 1's transaction is open again


def open_segment_log(data_dir: Path) -> tuple[SegmentStorageEngine, UnifiedLog]:
    engine = SegmentStorageEngine(str(data_dir), {})
    return engine, UnifiedLog(engine.open_log(TP, LogConfig()))


def crash_with_abort(data_dir: Path) -> None:
    """A log with an aborted transaction whose engine is dropped without a close (the page
    cache keeps what was written, as after a kill -9); the producer snapshot precedes it."""
    engine, log = open_segment_log(data_dir)
    produce(log, transactional_batch(5, 0, 0))
    log.take_producer_snapshot()
    log.append_marker_as_leader(5, 0, 0, commit=False, leader_epoch=0)
    produce(log, transactional_batch(6, 0, 0))
    log.engine_log.flush()
    del engine, log


@pytest.mark.parametrize("damage", ["torn entry", "index lost"])
def test_the_index_is_rebuilt_from_the_log_after_the_snapshot(tmp_path: Path, damage: str) -> None:
    crash_with_abort(tmp_path)
    index = tmp_path / f"{TP}" / TXN_INDEX_FILE
    if damage == "torn entry":
        os.truncate(index, index.stat().st_size - 5)
    else:
        index.unlink()
    engine, log = open_segment_log(tmp_path)
    try:
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(5, 0, 1, 2)]
        assert log.last_stable_offset <= 2  # producer 6's transaction is open
        assert index.stat().st_size == 34  # one whole entry again
    finally:
        engine.close()


def test_without_a_snapshot_the_whole_log_is_replayed(tmp_path: Path) -> None:
    crash_with_abort(tmp_path)
    (tmp_path / f"{TP}" / TXN_INDEX_FILE).unlink()
    (tmp_path / f"{TP}" / "producer-state.checkpoint").unlink()
    engine, log = open_segment_log(tmp_path)
    try:
        assert log.collect_aborted_txns(0, 100) == [AbortedTxn(5, 0, 1, 2)]
        assert log.producer_state.ongoing_txns == {6: 2}
    finally:
        engine.close()


def test_an_open_transaction_below_the_log_start_counts_from_the_log_start() -> None:
    log = UnifiedLog(MemoryLog(LogConfig(segment_bytes=1)))
    produce(log, transactional_batch(1, 0, 0, count=2))  # open, offsets 0-1
    produce(log, build_batch([SimpleRecord(None, b"plain")]))  # offset 2
    assert log.last_stable_offset == 0
    log.maybe_increment_log_start_offset(2)  # DeleteRecords past the transaction's start
    assert (log.log_start_offset, log.last_stable_offset, log.high_watermark) == (2, 2, 3)
