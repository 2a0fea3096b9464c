"""UnifiedLog and checkpoint files under write faults.

* ``write_atomically``: a torn temp write or a failed fsync keeps the old file, removes the
  temp file and raises.
* An append the engine fails leaves the producer state, the leader-epoch cache and the log end
  as they were, answers KAFKA_STORAGE_ERROR, and the idempotent producer's retry of the same
  batch is accepted once space returns (neither a duplicate nor OUT_OF_ORDER_SEQUENCE).
* A checkpoint (high watermark, producer snapshot, leader epochs) that fails is logged once,
  never raises into the checkpoint pass, and is written by a later pass; the snapshot waits
  for the epoch file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.engines.segment import SegmentStorageEngine
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.checkpoint import read_checkpoint_file, write_atomically
from pydmq.storage.errors import SyncFailedError
from pydmq.storage.log import AppendPolicy, LogAppendError, UnifiedLog

pytestmark = pytest.mark.timeout(60)

Arm = Callable[[str], None]
TP = TopicPartition("faults", 0)
POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)
PRODUCER = 7


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("checkpoint.write=short", OSError),
        ("checkpoint.write=eio", OSError),
        ("checkpoint.fsync=eio", SyncFailedError),
        ("checkpoint.rename=enospc", OSError),
    ],
)
def test_a_failed_atomic_write_keeps_the_old_file(
    tmp_path: Path, arm_failpoints: Arm, spec: str, error: type[OSError]
) -> None:
    path = tmp_path / "state.checkpoint"
    write_atomically(str(path), b"old content")
    arm_failpoints(spec)
    with pytest.raises(error):
        write_atomically(str(path), b"new content, longer than the old")
    assert path.read_bytes() == b"old content"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.checkpoint"]


def idempotent_batch(sequence: int, count: int = 3) -> memoryview:
    data = build_batch(
        [SimpleRecord(None, b"v%d" % (sequence + i), (), 1000) for i in range(count)],
        producer_id=PRODUCER,
        producer_epoch=0,
        base_sequence=sequence,
    )
    return memoryview(bytearray(data))


def open_unified(data_dir: Path) -> tuple[SegmentStorageEngine, UnifiedLog]:
    engine = SegmentStorageEngine(str(data_dir), {})
    return engine, UnifiedLog(engine.open_log(TP, LogConfig()))


@pytest.mark.parametrize("spec", ["segment.append.write=short", "segment.create=enospc"])
def test_a_refused_append_leaves_the_producer_state_and_the_retry_succeeds(
    tmp_path: Path, arm_failpoints: Arm, spec: str
) -> None:
    engine, log = open_unified(tmp_path)
    log.maybe_assign_epoch_start_offset(3, 0)
    assert log.append_as_leader(idempotent_batch(0), 3, POLICY).first_offset == 0
    if spec.startswith("segment.create"):
        log.engine_log.config = LogConfig(segment_bytes=1)  # type: ignore[attr-defined]
    before = (log.producer_state.snapshot(), list(log.leader_epochs), log.log_end_offset)
    arm_failpoints(spec)
    for epoch in (3, 4):  # also a new leader epoch: its cache entry is undone
        with pytest.raises(LogAppendError) as refused:
            log.append_as_leader(idempotent_batch(3), epoch, POLICY)
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert (log.producer_state.snapshot(), log.leader_epochs, log.log_end_offset) == before
    arm_failpoints("")
    info = log.append_as_leader(idempotent_batch(3), 3, POLICY)  # the client's retry
    assert (info.first_offset, info.duplicate) == (3, False)
    assert log.append_as_leader(idempotent_batch(3), 3, POLICY).duplicate  # a second retry
    assert log.append_as_leader(idempotent_batch(6), 3, POLICY).first_offset == 6
    log.close()
    engine.close()


def test_a_refused_follower_append_leaves_the_replica_as_it_was(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine, log = open_unified(tmp_path)
    leader_engine, leader = open_unified(tmp_path / "leader")
    leader.maybe_assign_epoch_start_offset(5, 0)
    leader.append_as_leader(idempotent_batch(0), 5, POLICY)
    fetched = b"".join(bytes(b) for b in leader.read(0, 1 << 20, 1 << 20, True).buffers)
    arm_failpoints("segment.append.write=short")
    with pytest.raises(LogAppendError) as refused:
        log.append_as_follower(fetched)
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (log.log_end_offset, log.leader_epochs) == (0, [])
    assert log.producer_state.last_entry(PRODUCER) is None
    arm_failpoints("")
    assert log.append_as_follower(fetched) is not None
    assert (log.log_end_offset, log.leader_epochs) == (3, [(5, 0)])
    for closing in (log, leader):
        closing.close()
    engine.close()
    leader_engine.close()


def test_failed_checkpoints_are_logged_once_and_written_by_a_later_pass(
    tmp_path: Path, arm_failpoints: Arm, caplog: pytest.LogCaptureFixture
) -> None:
    engine, log = open_unified(tmp_path)
    log.maybe_assign_epoch_start_offset(1, 0)
    log.append_as_leader(idempotent_batch(0), 1, POLICY)
    log.update_high_watermark(3)
    arm_failpoints("checkpoint.write=enospc")
    caplog.set_level(logging.INFO, "pydmq.storage.log")
    for _ in range(3):
        log.maybe_checkpoint()  # never raises
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    # The snapshot is not even tried while the epoch file lags behind.
    assert [r.getMessage().split(" not written")[0] for r in errors] == [
        "checkpoint leader-epoch-checkpoint",
        "checkpoint high-watermark",
    ]
    assert log.engine_log.read_checkpoint("high-watermark") is None
    assert log.engine_log.read_checkpoint("producer-state") is None
    arm_failpoints("")
    assert log.maybe_checkpoint() == 3  # retried without any new change
    assert log.engine_log.read_checkpoint("high-watermark") == (3).to_bytes(8, "big")
    assert log.engine_log.read_checkpoint("producer-state")
    log.close()
    engine.close()


def test_the_producer_snapshot_waits_for_a_failed_epoch_file(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    engine, log = open_unified(tmp_path)
    log.maybe_assign_epoch_start_offset(1, 0)
    log.append_as_leader(idempotent_batch(0), 1, POLICY)
    log.maybe_checkpoint()
    arm_failpoints("checkpoint.write=enospc-times=1")  # the epoch file, written at once
    log.maybe_assign_epoch_start_offset(2, 3)
    log.append_as_leader(idempotent_batch(3), 2, POLICY)
    epochs_path = Path(log.engine_log.dir) / "leader-epoch-checkpoint.checkpoint"  # type: ignore[attr-defined]
    assert b"[2, 3]" not in epochs_path.read_bytes()
    snapshot = read_checkpoint_file(str(Path(epochs_path).with_name("producer-state.checkpoint")))
    log.maybe_checkpoint()  # epochs first, then the snapshot
    assert b"[2, 3]" in epochs_path.read_bytes()
    assert read_checkpoint_file(str(epochs_path.with_name("producer-state.checkpoint"))) != snapshot
    log.close()
    engine.close()
