"""The segment engine's aborted-transaction index across a power loss (the model of
:mod:`crash_support`: only what was fsynced survives, unsynced tails are cut, zeroed or
garbage).

An ABORT entry is fdatasynced when recorded. If the marker's batch did not survive, the entry
must go at open and the transaction is open again; if it did (flushed), the entry is there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_support import DiskTracker, apply_power_loss

from pydmq.engines.segment import SegmentStorageEngine
from pydmq.storage.api import AbortedTxn, LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, UnifiedLog
from pydmq.testing.conformance_transactions import transactional_batch

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("txn", 0)
POLICY = AppendPolicy(1 << 20, False, 2**62, 2**62, 2**62)


@pytest.fixture
def tracked(tmp_path: Path) -> Iterator[tuple[DiskTracker, Path]]:
    root = tmp_path / "disk"
    root.mkdir()
    tracker = DiskTracker(root, tmp_path / "side")
    tracker.install()
    try:
        yield tracker, root
    finally:
        tracker.uninstall()


def reopen(path: Path) -> tuple[SegmentStorageEngine, UnifiedLog]:
    engine = SegmentStorageEngine(str(path))
    return engine, UnifiedLog(engine.open_log(TP, LogConfig()))


@pytest.mark.parametrize("tail", ["truncate", "zero", "garbage"])
@pytest.mark.parametrize("flushed", [False, True])
def test_an_abort_entry_lives_and_dies_with_its_marker(
    tracked: tuple[DiskTracker, Path], tmp_path: Path, tail: str, flushed: bool
) -> None:
    tracker, root = tracked
    engine, log = reopen(root / "data")
    try:
        log.append_as_leader(memoryview(bytearray(transactional_batch(5, 0, 0, 2))), 0, POLICY)
        log.flush()
        log.take_producer_snapshot()
        log.append_marker_as_leader(5, 0, 0, commit=False, leader_epoch=0)  # offset 2
        if flushed:
            log.flush()
        after = tmp_path / "after"
        apply_power_loss(root, Path(tracker.side), after, tail=tail, lmdb="lost")
    finally:
        engine.close()
    engine, log = reopen(after / "data")
    try:
        log.update_high_watermark(log.log_end_offset)
        if flushed:
            assert log.log_end_offset == 3
            assert log.collect_aborted_txns(0, 100) == [AbortedTxn(5, 0, 2, 3)]
            assert log.last_stable_offset == 3
        else:
            assert log.log_end_offset == 2  # the marker was never synced
            assert log.collect_aborted_txns(0, 100) == []
            assert log.last_stable_offset == 0  # the transaction is open again
    finally:
        engine.close()
