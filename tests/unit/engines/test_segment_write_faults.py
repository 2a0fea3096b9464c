"""Segment engine under write faults: a failed write or fsync never leaves bytes to build on.

Faults come from the failpoints (``arm_failpoints``): ``short`` (half the write lands, then
ENOSPC), ``enospc``, ``emfile`` and ``eio`` at the segment write, fsync and roll, the LMDB commit and
sync, and the checkpoint writes. After each: the log's state is what it was before the failed
append, reads keep working, appends resume after a full disk, an I/O error or a failed fsync
takes the data dir offline for good, and a reopen finds every batch that was appended.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.engines.segment import SegmentLog, SegmentStorageEngine
from pydmq.engines.segment import segment as segment_module
from pydmq.engines.segment.index import segment_prefix
from pydmq.engines.segment.loader import RECOVERY_POINT_CHECKPOINT
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.checkpoint import read_offset_checkpoint
from pydmq.storage.errors import KafkaStorageError
from pydmq.testing.conformance import append_batches, fetched_bytes, make_batch

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("faults", 0)
CONFIG = LogConfig(segment_bytes=2_000, index_interval_bytes=150)
BIG = 1 << 30
Arm = Callable[[str], None]


def open_log(data_dir: Path) -> tuple[SegmentStorageEngine, SegmentLog]:
    engine = SegmentStorageEngine(str(data_dir), {"index.flush.ms": "0"})
    return engine, engine.open_log(TP, CONFIG)


def batch(i: int) -> bytes:
    return make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40)


def append(log: SegmentLog, i: int) -> bytes:
    data = batch(i)
    append_batches(log, data)
    return data


def active_file(data_dir: Path) -> Path:
    return sorted((data_dir / "faults-0").glob("*.log"))[-1]


def reopened(data_dir: Path) -> bytes:
    engine, log = open_log(data_dir)
    try:
        assert log.truncated_bytes == 0, "recovery had to cut torn bytes"
        return fetched_bytes(log.read(0, BIG, BIG, True))
    finally:
        engine.close()


def test_a_short_write_then_enospc_is_truncated_back_and_appends_resume(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(5)]
    size = active_file(tmp_path).stat().st_size
    arm_failpoints("segment.append.write=short-times=2")
    for _ in range(2):
        with pytest.raises(KafkaStorageError) as failed:
            append(log, 5)
        assert not failed.value.offline, "a full disk is transient"
    assert active_file(tmp_path).stat().st_size == size, "torn bytes left in the segment"
    assert log.log_end_offset == 10
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)
    kept += [append(log, i) for i in range(5, 8)]  # the disk has room again
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_a_torn_write_is_undone_without_failpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue as measured: a short os.write, then ENOSPC on the retry of the rest."""
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(3)]
    real_write = os.write
    calls = []

    def short_then_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, memoryview(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module.os, "write", short_then_full)
    with pytest.raises((KafkaStorageError, OSError)):
        append(log, 3)
    monkeypatch.setattr(segment_module.os, "write", real_write)
    kept += [append(log, i) for i in range(3, 6)]
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_eio_on_write_takes_the_data_dir_offline(tmp_path: Path, arm_failpoints: Arm) -> None:
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(4)]
    log.flush()
    size = active_file(tmp_path).stat().st_size
    arm_failpoints("segment.append.write=eio-times=1")
    with pytest.raises(KafkaStorageError) as failed:
        append(log, 4)
    assert failed.value.offline and engine.offline is not None
    assert active_file(tmp_path).stat().st_size == size
    with pytest.raises(KafkaStorageError):  # the fault is gone, the dir stays offline
        append(log, 4)
    with pytest.raises(KafkaStorageError):
        log.write_checkpoint("high-watermark", b"x")
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)  # reads keep working
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_a_failed_fsync_is_never_retried_and_the_recovery_point_stays(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(3)]
    log.flush()
    checkpoint = tmp_path / "faults-0" / RECOVERY_POINT_CHECKPOINT
    assert read_offset_checkpoint(str(checkpoint)) == 6
    kept += [append(log, i) for i in range(3, 5)]
    arm_failpoints("segment.fsync=eio-times=1")
    with pytest.raises(KafkaStorageError) as failed:
        log.flush()
    assert failed.value.offline
    with pytest.raises(KafkaStorageError):  # a second fsync could succeed over lost pages
        log.flush()
    assert read_offset_checkpoint(str(checkpoint)) == 6
    assert log.recovery_point == 6
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)
    engine.close()
    assert read_offset_checkpoint(str(checkpoint)) == 6  # close promised nothing either
    assert reopened(tmp_path) == b"".join(kept)


def test_flush_messages_one_refuses_the_append_when_the_fsync_fails(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine = SegmentStorageEngine(str(tmp_path), {})
    log = engine.open_log(TP, LogConfig(flush_messages=1))
    append(log, 0)
    arm_failpoints("segment.fsync=eio")
    with pytest.raises(KafkaStorageError):
        append(log, 1)
    with pytest.raises(KafkaStorageError):
        append(log, 2)
    engine.close()


def test_a_failed_roll_keeps_the_log_as_it_was(tmp_path: Path, arm_failpoints: Arm) -> None:
    engine, log = open_log(tmp_path)
    kept = []
    while len(log.segments) == 1:
        kept.append(append(log, len(kept)))
    kept.pop()  # undo the append that rolled: rebuild the log to just before a roll
    engine.close()
    for p in (tmp_path / "faults-0").iterdir():
        p.unlink()
    engine, log = open_log(tmp_path)
    for i, data in enumerate(kept):
        assert append(log, i) == data
    arm_failpoints("segment.create=enospc-times=1")
    with pytest.raises(KafkaStorageError) as failed:
        append(log, len(kept))
    assert not failed.value.offline
    # The roll happened in memory; the new segment's file is created by the append, which
    # failed: the new segment is empty and active, and holds nothing on disk yet.
    assert len(log.segments) == 2 and log.segments[-1].active and log.segments[-1].is_empty
    assert not os.path.exists(log.segments[-1].path)
    assert log.log_end_offset == len(kept) * 2
    kept.append(append(log, len(kept)))  # the retry creates the file
    assert len(log.segments) == 2 and os.path.exists(log.segments[-1].path)
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_no_file_descriptor_left_is_transient_and_the_dir_stays_online(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    """EMFILE when a new log creates its first segment (a broker whose connections took every
    descriptor): that append fails, the data dir stays online, the next append succeeds."""
    engine, log = open_log(tmp_path)
    arm_failpoints("segment.create=emfile-times=1")
    with pytest.raises(KafkaStorageError) as failed:
        append(log, 0)
    assert not failed.value.offline and engine.offline is None
    assert log.log_end_offset == 0
    kept = [append(log, i) for i in range(3)]
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(kept)
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_a_failed_index_commit_never_fails_an_append(tmp_path: Path, arm_failpoints: Arm) -> None:
    engine, log = open_log(tmp_path)
    arm_failpoints("index.commit=eio")
    kept = [append(log, i) for i in range(20)]  # index.flush.ms=0: a put after each append
    assert engine.offline is None
    base = log.segments[0].base_offset
    assert engine.index.offset_entries(segment_prefix(TP, base)) == []
    for i in range(20):  # lookups use the entries kept in memory
        assert fetched_bytes(log.read(i * 2 + 1, 1, BIG, True)) == kept[i]
    arm_failpoints("")
    log.flush()  # writes what waited
    assert engine.index.offset_entries(segment_prefix(TP, base)) != []
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)


def test_a_failed_index_sync_takes_the_data_dir_offline(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(3)]
    arm_failpoints("index.sync=eio")
    with pytest.raises(KafkaStorageError) as failed:
        log.flush()
    assert failed.value.offline
    with pytest.raises(KafkaStorageError):
        append(log, 3)
    engine.close()
    arm_failpoints("")
    assert reopened(tmp_path) == b"".join(kept)


@pytest.mark.parametrize("spec", ["checkpoint.write=short", "checkpoint.fsync=eio"])
def test_a_failed_recovery_point_write_keeps_the_old_one(
    tmp_path: Path, arm_failpoints: Arm, spec: str
) -> None:
    engine, log = open_log(tmp_path)
    kept = [append(log, i) for i in range(3)]
    log.flush()
    kept.append(append(log, 3))
    arm_failpoints(spec)
    with pytest.raises(KafkaStorageError):
        log.flush()
    checkpoint = tmp_path / "faults-0" / RECOVERY_POINT_CHECKPOINT
    assert read_offset_checkpoint(str(checkpoint)) == 6
    assert not list((tmp_path / "faults-0").glob("*.tmp")), "a temp file was left behind"
    arm_failpoints("")
    engine.close()
    assert reopened(tmp_path) == b"".join(kept)
