"""The metadata log and the quorum state under write faults.

* An append whose write fails (torn or not) is truncated back: the entries were never in the
  log, the log end and the epoch cache did not move, and the next append lands right after the
  last good entry (a reopen finds every entry, no torn frame).
* A failed fsync cuts every entry written since the last good flush (they were refused, a
  restart must not replay them) and takes the log offline: nothing is flushed or acknowledged
  any more (not even the log end offset a follower's fetch would report) until a restart,
  which recovers the log as of the last good flush. When the cut itself fails, the first cut
  frame is zeroed so that recovery cuts it as a torn tail.
* A quorum-state write that fails keeps the previous state on disk and raises, so the core
  sends nothing that depends on the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.raft.file_log import FileRaftLog, MetadataLogOfflineError
from pydmq.raft.log import Entry
from pydmq.raft.state import FileQuorumStateStore, QuorumState

pytestmark = pytest.mark.timeout(30)

Arm = Callable[[str], None]


def entries(start: int, count: int, epoch: int) -> list[Entry]:
    return [Entry(start + i, epoch, b"payload-%d" % (start + i)) for i in range(count)]


@pytest.mark.parametrize("spec", ["raft.append.write=short", "raft.append.write=enospc"])
def test_a_failed_append_is_truncated_back(tmp_path: Path, arm_failpoints: Arm, spec: str) -> None:
    log = FileRaftLog(str(tmp_path))
    log.append(entries(0, 5, 1))
    log.flush()
    arm_failpoints(spec)
    with pytest.raises(OSError):
        log.append(entries(5, 5, 2))
    assert (log.log_end_offset, log.last_epoch) == (5, 1)
    arm_failpoints("")
    log.append(entries(5, 3, 2))
    log.flush()
    assert [e.payload for e in log.read(0, 1 << 20)] == [b"payload-%d" % i for i in range(8)]
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.log_end_offset == 8
    assert [e.epoch for e in reopened.read(0, 1 << 20)] == [1] * 5 + [2] * 3
    reopened.close()


def test_a_failed_fsync_takes_the_log_offline(tmp_path: Path, arm_failpoints: Arm) -> None:
    log = FileRaftLog(str(tmp_path))
    log.append(entries(0, 3, 1))
    log.flush()
    log.append(entries(3, 2, 1))
    arm_failpoints("raft.fsync=eio-times=1")
    with pytest.raises(MetadataLogOfflineError):
        log.flush()
    for call in (log.flush, lambda: log.append(entries(5, 1, 1)), lambda: log.log_end_offset):
        with pytest.raises(MetadataLogOfflineError):
            call()
    log.close()
    reopened = FileRaftLog(str(tmp_path))  # recovery scans every frame
    assert (reopened.log_end_offset, reopened.last_epoch) == (3, 1)
    reopened.append(entries(3, 1, 2))
    reopened.flush()
    assert [e.payload for e in reopened.read(0, 1 << 20)] == [b"payload-%d" % i for i in range(4)]
    reopened.close()


def test_a_failed_fsync_cuts_the_entries_of_a_rolled_segment(
    tmp_path: Path, arm_failpoints: Arm
) -> None:
    log = FileRaftLog(str(tmp_path), segment_bytes=64)
    for offset in range(4):  # one entry per segment past the first
        log.append(entries(offset, 1, 1))
        if offset < 2:
            log.flush()
    arm_failpoints("raft.fsync=eio-times=1")
    with pytest.raises(MetadataLogOfflineError):
        log.flush()
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.log_end_offset == 2
    reopened.close()


def test_an_undo_that_cannot_truncate_zeroes_the_frame_for_recovery_to_cut(
    tmp_path: Path, arm_failpoints: Arm, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FileRaftLog(str(tmp_path))
    log.append(entries(0, 2, 1))
    log.flush()
    log.append(entries(2, 2, 1))

    def failing_ftruncate(fd: int, length: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("pydmq.raft.file_log.os.ftruncate", failing_ftruncate)
    arm_failpoints("raft.fsync=eio-times=1")
    with pytest.raises(MetadataLogOfflineError):
        log.flush()
    monkeypatch.undo()
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.log_end_offset == 2
    reopened.close()


def test_a_failed_append_whose_undo_fails_is_cut_at_recovery(
    tmp_path: Path, arm_failpoints: Arm, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FileRaftLog(str(tmp_path))
    log.append(entries(0, 2, 1))
    log.flush()

    def failing_ftruncate(fd: int, length: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("pydmq.raft.file_log.os.ftruncate", failing_ftruncate)
    arm_failpoints("raft.append.write=short")
    with pytest.raises(MetadataLogOfflineError):
        log.append(entries(2, 3, 1))
    monkeypatch.undo()
    log.close()
    reopened = FileRaftLog(str(tmp_path))
    assert reopened.log_end_offset == 2
    reopened.close()


@pytest.mark.parametrize(
    "spec", ["quorum_state.write=eio", "checkpoint.write=short", "checkpoint.fsync=eio"]
)
def test_a_failed_quorum_state_write_keeps_the_old_state(
    tmp_path: Path, arm_failpoints: Arm, spec: str
) -> None:
    store = FileQuorumStateStore(str(tmp_path / "quorum-state"))
    store.write(QuorumState(3, 1, 1))
    arm_failpoints(spec)
    with pytest.raises(OSError):
        store.write(QuorumState(4, 2, None))
    assert store.read() == QuorumState(3, 1, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]
