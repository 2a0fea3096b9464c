"""RaftLog contract for both logs, and FileRaftLog's recovery of torn and corrupt tails."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pydmq.raft.file_log import FileRaftLog
from pydmq.raft.log import (
    CorruptSnapshotError,
    Entry,
    MemoryRaftLog,
    PositionOutOfRangeError,
    RaftLog,
    RaftLogError,
    SnapshotId,
    SnapshotNotFoundError,
    decode_snapshot,
    encode_snapshot,
)


def entries(start: int, epochs: list[int]) -> list[Entry]:
    return [Entry(start + i, e, f"p{start + i}".encode()) for i, e in enumerate(epochs)]


@pytest.fixture(params=["memory", "file"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RaftLog]]:
    opened: list[RaftLog] = []

    def make() -> RaftLog:
        log: RaftLog
        if request.param == "memory":
            log = MemoryRaftLog()
        else:
            log = FileRaftLog(str(tmp_path / f"log{len(opened)}"), segment_bytes=200)
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def test_empty_log(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (0, 0, 0)
    assert log.read(0, 100) == []
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(5) == (0, 0)
    assert log.latest_snapshot() is None


def test_append_read_and_epoch_lookups(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    log.append(entries(0, [1, 1, 1, 3, 3, 6]))
    log.flush()
    assert log.log_end_offset == 6 and log.last_epoch == 6
    assert [e.offset for e in log.read(2, 1 << 20)] == [2, 3, 4, 5]
    assert log.read(4, 1 << 20)[0] == Entry(4, 3, b"p4")
    # At least one entry even when it does not fit; then only what fits.
    assert len(log.read(0, 0)) == 1
    assert len(log.read(0, 2 * log.read(0, 0)[0].size)) == 2
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(2) == (1, 3)  # largest epoch <= 2 is 1
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(5) == (3, 5)
    assert log.end_offset_for_epoch(6) == (6, 6)
    assert log.end_offset_for_epoch(9) == (6, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_append_must_be_contiguous_with_non_decreasing_epochs(
    make_log: Callable[[], RaftLog],
) -> None:
    log = make_log()
    log.append(entries(0, [2, 2]))
    with pytest.raises(RaftLogError):
        log.append(entries(3, [2]))
    with pytest.raises(RaftLogError):
        log.append(entries(2, [1]))
    assert log.log_end_offset == 2


def test_truncate_to_forgets_entries_and_epochs(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    log.append(entries(0, [1, 1, 2, 2, 4, 4]))
    log.truncate_to(3)
    assert log.log_end_offset == 3 and log.last_epoch == 2
    assert log.end_offset_for_epoch(4) == (2, 3)
    log.truncate_to(10)  # beyond the end: nothing
    assert log.log_end_offset == 3
    log.append(entries(3, [5]))
    assert [(e.offset, e.epoch) for e in log.read(0, 1 << 20)] == [(0, 1), (1, 1), (2, 2), (3, 5)]
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.last_epoch == 0


def test_snapshot_drops_prefix_and_answers_older_epochs(make_log: Callable[[], RaftLog]) -> None:
    log = make_log()
    log.append(entries(0, [1, 1, 2, 2, 3, 3]))
    log.flush()
    with pytest.raises(RaftLogError):
        log.create_snapshot(4, 3, [b"x"])  # entry 3 has epoch 2
    snap = log.create_snapshot(4, 2, [b"state-a", b"state-b"])
    assert snap == SnapshotId(4, 2) and log.latest_snapshot() == snap
    assert log.log_start_offset == 4 and log.log_end_offset == 6
    assert log.load_snapshot(snap) == [b"state-a", b"state-b"]
    assert [e.offset for e in log.read(4, 1 << 20)] == [4, 5]
    with pytest.raises(RaftLogError):
        log.read(3, 100)
    assert log.end_offset_for_epoch(2) == (2, 4)
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(1) is None  # older than the snapshot: fetch the snapshot
    with pytest.raises(RaftLogError):
        log.truncate_to(3)
    # A second snapshot replaces the first one.
    snap2 = log.create_snapshot(6, 3, [b"state-c"])
    assert log.latest_snapshot() == snap2
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (6, 6, 3)
    with pytest.raises(SnapshotNotFoundError):
        log.read_snapshot(snap, 0, 10)


def test_read_and_install_snapshot_in_chunks(make_log: Callable[[], RaftLog]) -> None:
    leader = make_log()
    leader.append(entries(0, [1, 1, 1, 2]))
    leader.flush()
    snap = leader.create_snapshot(3, 1, [b"a" * 50, b"b" * 70])
    chunks = []
    position = 0
    while True:
        chunk, size = leader.read_snapshot(snap, position, 16)
        chunks.append(chunk)
        position += len(chunk)
        if position >= size:
            break
    with pytest.raises(PositionOutOfRangeError):
        leader.read_snapshot(snap, size + 1, 16)
    follower = make_log()
    follower.append(entries(0, [1, 1]))
    with pytest.raises(CorruptSnapshotError):
        follower.install_snapshot(snap, b"".join(chunks)[:-1])
    follower.install_snapshot(snap, b"".join(chunks))
    assert (follower.log_start_offset, follower.log_end_offset, follower.last_epoch) == (3, 3, 1)
    assert follower.load_snapshot(snap) == [b"a" * 50, b"b" * 70]
    follower.append([Entry(3, 2, b"next")])
    assert follower.end_offset_for_epoch(1) == (1, 3)


def test_snapshot_codec_rejects_garbage() -> None:
    data = encode_snapshot(SnapshotId(7, 2), [b"x", b"", b"yz"])
    assert decode_snapshot(data) == (SnapshotId(7, 2), [b"x", b"", b"yz"])
    for bad in (b"", data[:10], data[:-1] + bytes([data[-1] ^ 1]), b"\0" * len(data)):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bad)


def test_memory_log_crash_loses_only_unflushed_entries() -> None:
    log = MemoryRaftLog()
    log.append(entries(0, [1, 1]))
    log.flush()
    log.append(entries(2, [1, 2, 2]))
    log.crash(keep_unflushed=1)
    assert log.log_end_offset == 3 and log.last_epoch == 1
    log.append(entries(3, [3]))
    log.crash()
    assert log.log_end_offset == 3


# -- FileRaftLog recovery -------------------------------------------------------------


def _segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.log"))


def test_file_log_survives_reopen(tmp_path: Path) -> None:
    directory = str(tmp_path / "log")
    log = FileRaftLog(directory, segment_bytes=100)
    for entry in entries(0, [1, 1, 2, 2, 2, 3, 3, 3, 3]):
        log.append([entry])  # a segment rolls between appends, never inside one
    log.flush()
    assert len(_segments(tmp_path / "log")) > 1  # rolled
    log.close()
    log = FileRaftLog(directory, segment_bytes=100)
    assert log.log_end_offset == 9 and log.last_epoch == 3
    assert log.read(0, 1 << 20) == entries(0, [1, 1, 2, 2, 2, 3, 3, 3, 3])
    assert log.end_offset_for_epoch(2) == (2, 5)
    log.close()


def test_file_log_cuts_a_torn_tail(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = FileRaftLog(str(directory))
    log.append(entries(0, [1, 1, 1]))
    log.flush()
    log.close()
    segment = _segments(directory)[-1]
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 3)  # the last frame lost its last bytes
    log = FileRaftLog(str(directory))
    assert log.log_end_offset == 2
    log.append(entries(2, [2]))  # appends continue right after the cut
    log.flush()
    log.close()
    log = FileRaftLog(str(directory))
    assert [(e.offset, e.epoch) for e in log.read(0, 1 << 20)] == [(0, 1), (1, 1), (2, 2)]
    log.close()


def test_file_log_cuts_at_a_corrupt_crc_and_drops_later_segments(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = FileRaftLog(str(directory), segment_bytes=60)
    for entry in entries(0, [1] * 8):
        log.append([entry])
    log.flush()
    log.close()
    first = _segments(directory)[0]
    assert len(_segments(directory)) > 1
    data = bytearray(first.read_bytes())
    frame = len(data) // 2
    # Flip a payload byte of an entry in the middle of the first segment.
    data[frame + 25] ^= 0xFF
    first.write_bytes(bytes(data))
    log = FileRaftLog(str(directory), segment_bytes=60)
    end = log.log_end_offset
    assert 0 < end < 8
    assert [e.offset for e in log.read(0, 1 << 20)] == list(range(end))
    assert len(_segments(directory)) == 1
    log.close()


def test_file_log_ignores_garbage_length(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = FileRaftLog(str(directory))
    log.append(entries(0, [1, 1]))
    log.flush()
    log.close()
    segment = _segments(directory)[-1]
    with open(segment, "ab") as f:
        f.write(b"\x7f\xff\xff\xff" + os.urandom(30))
    log = FileRaftLog(str(directory))
    assert log.log_end_offset == 2
    log.close()


def test_file_log_recovers_snapshot_and_start(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = FileRaftLog(str(directory), segment_bytes=60)
    log.append(entries(0, [1, 1, 1, 2, 2, 2, 2]))
    log.flush()
    snap = log.create_snapshot(5, 2, [b"s"])
    log.append(entries(7, [3]))
    log.flush()
    log.close()
    (directory / "junk.tmp").write_bytes(b"half a snapshot")
    log = FileRaftLog(str(directory), segment_bytes=60)
    assert log.latest_snapshot() == snap
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (5, 8, 3)
    assert [e.offset for e in log.read(5, 1 << 20)] == [5, 6, 7]
    assert log.end_offset_for_epoch(1) is None
    assert log.end_offset_for_epoch(2) == (2, 7)
    assert not (directory / "junk.tmp").exists()
    log.close()


def test_file_log_prefers_installed_snapshot_over_stale_segments(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    leader = MemoryRaftLog()
    leader.append(entries(0, [4, 4, 4, 4]))
    snap = leader.create_snapshot(4, 4, [b"state"])
    data, _ = leader.read_snapshot(snap, 0, 1 << 20)
    log = FileRaftLog(str(directory))
    log.append(entries(0, [1, 1]))  # a stale log that the snapshot replaces
    log.flush()
    log.install_snapshot(snap, data)
    log.close()
    log = FileRaftLog(str(directory))
    assert (log.log_start_offset, log.log_end_offset, log.last_epoch) == (4, 4, 4)
    log.close()
    # A crash between writing the snapshot and deleting old segments: the snapshot wins.
    (directory / f"{0:020d}.log").write_bytes(b"")
    stale = FileRaftLog(str(tmp_path / "other"))
    stale.append(entries(0, [1, 1]))
    stale.flush()
    stale.close()
    os.replace(tmp_path / "other" / f"{0:020d}.log", directory / f"{0:020d}.log")
    log = FileRaftLog(str(directory))
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    assert log.load_snapshot(snap) == [b"state"]
    log.close()


def test_file_log_corrupt_snapshot_is_dropped(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    log = FileRaftLog(str(directory))
    log.append(entries(0, [1, 1, 1]))
    log.flush()
    snap = log.create_snapshot(2, 1, [b"x"])
    log.close()
    path = next(directory.glob("*.checkpoint"))
    path.write_bytes(path.read_bytes()[:-2])
    # Without a valid snapshot the log cannot start above 0 ... but its segments still
    # begin at 0 here, so it falls back to the whole log.
    log = FileRaftLog(str(directory))
    assert log.latest_snapshot() is None and log.log_start_offset == 0
    assert log.log_end_offset == 3
    del snap
    log.close()
