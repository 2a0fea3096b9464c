"""The segment engine's open files: opened on first use, closed by an LRU within a budget.

Kafka keeps every segment file open; pydmq ran out of descriptors at about 4,000 partitions
and could not restart. These tests pin the lifecycle that replaced it: the budget holds, the
least recently used segment is closed first, a segment written since its last sync is synced
before its descriptor closes, mmap views outlive the close, and every operation reopens what
it needs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pydmq.engines.segment import LogSegment, SegmentLog, SegmentStorageEngine
from pydmq.engines.segment.handles import FileHandleCache
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.errors import KafkaStorageError
from pydmq.testing.conformance import append_batches, fetched_bytes, make_batch

pytestmark = pytest.mark.timeout(60)

CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=150)
BIG = 1 << 30
BUDGET = 16


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def engine_with_budget(data_dir: Path, budget: int = BUDGET) -> SegmentStorageEngine:
    return SegmentStorageEngine(str(data_dir), {"open.files.max": str(budget)})


def logs(engine: SegmentStorageEngine, count: int) -> list[SegmentLog]:
    return [engine.open_log(TopicPartition("t", p), CONFIG) for p in range(count)]


def write(log: SegmentLog, batches: int = 1, *, value_size: int = 40) -> list[bytes]:
    out = []
    for _ in range(batches):
        batch = make_batch(log.log_end_offset, 2, timestamp=1_000, value_size=value_size)
        append_batches(log, batch)
        out.append(batch)
    return out


def active(log: SegmentLog) -> LogSegment:
    return log.segments[-1]


def test_opening_logs_opens_no_file_and_creates_nothing(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    before = open_fds()
    opened = logs(engine, 50)
    assert engine.handles.open_count == 0 and open_fds() == before
    assert not any(os.path.exists(log.dir) for log in opened)
    write(opened[7])
    assert os.path.isdir(opened[7].dir) and not os.path.exists(opened[8].dir)
    engine.close()


def test_restart_holds_the_budget(tmp_path: Path) -> None:
    """A restart reads two batch headers of each segment its metadata trusts (the loader's
    cheap checks against stray and damaged files), through the cache: 40 logs, 16 files."""
    engine = engine_with_budget(tmp_path)
    for log in logs(engine, 40):
        write(log, 3)
    engine.close()
    before = open_fds()
    engine = engine_with_budget(tmp_path)
    reopened = logs(engine, 40)
    assert engine.handles.open_count <= BUDGET
    # The LMDB environment's files and the budget's descriptors (an mmap holds a duplicate).
    assert open_fds() - before <= 4 + BUDGET
    assert all(log.log_end_offset == 6 for log in reopened)
    engine.close()


def test_a_new_log_drops_index_entries_its_lost_directory_left(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    [old] = logs(engine, 1)
    write(old, 30, value_size=100)  # several segments, many index entries
    engine.close()
    shutil.rmtree(tmp_path / "t-0")  # a crash between removing the directory and its entries
    engine = engine_with_budget(tmp_path)
    [new] = logs(engine, 1)
    assert engine.index.segment_metas(new.tp) == {}
    fresh = write(new, 30, value_size=60)
    for i, batch in enumerate(fresh):
        assert fetched_bytes(new.read(i * 2 + 1, 1, BIG, True)) == batch
    engine.close()


def test_the_budget_holds_and_every_partition_reads_back(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    written = {}
    before = open_fds()
    for log in logs(engine, 60):
        written[log.tp] = write(log, 2)
        assert engine.handles.open_count <= BUDGET
    assert open_fds() - before <= BUDGET + 4
    assert engine.handles.evictions >= 60 - BUDGET
    for log in logs(engine, 60):  # the same logs: every read reopens its file
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(written[log.tp])
        assert engine.handles.open_count <= BUDGET
    engine.close()
    assert engine.handles.open_count == 0


def test_the_least_recently_used_segment_is_closed_first(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    hot, *others = logs(engine, 40)
    for log in others:
        write(hot)  # a partition being written stays open
        write(log)
        assert active(hot) in engine.handles
    assert active(others[0]) not in engine.handles  # the oldest went first
    assert active(others[-1]) in engine.handles
    engine.close()


def test_a_dirty_segment_is_synced_before_its_file_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fdatasync

    def recording(fd: int) -> None:
        os.fstat(fd)  # still open: the sync comes before the close
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    engine = engine_with_budget(tmp_path)
    first, *rest = logs(engine, BUDGET + 1)
    write(first)
    segment = active(first)
    fd = segment._fd
    for log in rest:
        write(log)
    assert segment not in engine.handles and segment._fd == -1
    assert synced == [fd]  # the only written segment that was closed
    synced.clear()
    first.flush()  # its obligation was met by that sync: nothing is left to sync or reopen
    assert synced == [] and segment not in engine.handles
    engine.close()


def test_a_clean_segment_is_closed_without_a_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_with_budget(tmp_path)
    first, *rest = logs(engine, BUDGET + 1)
    write(first)
    first.flush()
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    segment = active(first)
    fd = segment._fd
    for log in rest:
        write(log)
    assert segment not in engine.handles and fd not in synced
    engine.close()


def test_mmap_views_outlive_the_close(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    first, *rest = logs(engine, BUDGET + 4)
    batches = write(first, 30)  # rolls: the first segments are read through mmap
    info = first.read(0, BIG, BIG, True)
    view = info.buffers[0]
    assert isinstance(view, memoryview)
    expected = bytes(view)
    for log in rest:
        write(log)
        read = log.read(0, BIG, BIG, True)
        assert read.buffers
    assert first.segments[0] not in engine.handles
    assert bytes(view) == expected  # the map lives on with its views
    assert expected == b"".join(batches)[: len(expected)]
    del info, view
    engine.close()


def test_append_truncate_and_fsync_reopen_a_closed_file(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    first, *rest = logs(engine, BUDGET + 1)
    kept = write(first, 3)
    for log in rest:
        write(log)
    assert active(first) not in engine.handles
    later = write(first, 2)  # O_APPEND on the reopened file
    assert fetched_bytes(first.read(0, BIG, BIG, True)) == b"".join(kept + later)
    for log in rest:
        write(log)
    assert active(first) not in engine.handles
    first.truncate_to(6)
    assert first.log_end_offset == 6
    for log in rest:
        write(log)
    first.flush()
    engine.close()
    engine = engine_with_budget(tmp_path)
    [again] = logs(engine, 1)
    assert fetched_bytes(again.read(0, BIG, BIG, True)) == b"".join(kept)
    engine.close()


def test_a_file_that_vanished_is_an_error_not_a_new_empty_file(tmp_path: Path) -> None:
    engine = engine_with_budget(tmp_path)
    first, *rest = logs(engine, BUDGET + 1)
    write(first)
    for log in rest:
        write(log)
    segment = active(first)
    assert segment not in engine.handles
    os.unlink(segment.path)
    with pytest.raises(KafkaStorageError) as failed:
        write(first)
    assert isinstance(failed.value.__cause__, FileNotFoundError)
    assert failed.value.offline  # a vanished file is not a full disk: the dir goes offline
    assert not os.path.exists(segment.path)
    engine.close()


def test_the_cache_counts_a_map_as_a_descriptor() -> None:
    class Holder:
        def __init__(self) -> None:
            self.closed = 0

        def close_handles(self) -> None:
            self.closed += 1

    cache = FileHandleCache(16)
    holders = [Holder() for _ in range(9)]
    for holder in holders:
        cache.opened(holder)
        cache.opened(holder)  # its file and its map
    assert cache.open_count == 16 and holders[0].closed == 1
    cache.touch(holders[1])
    cache.opened(holders[2])
    assert holders[1].closed == 0 and holders[3].closed == 1
    cache.closed(holders[1], 1)
    assert cache.open_count == 14 and holders[1] in cache
    with pytest.raises(ValueError, match="at least"):
        FileHandleCache(2)


def test_a_failed_sync_keeps_the_file_open() -> None:
    class Failing:
        def close_handles(self) -> None:
            raise OSError(5, "EIO")

    class Fine:
        def __init__(self) -> None:
            self.closed = False

        def close_handles(self) -> None:
            self.closed = True

    cache = FileHandleCache(16)
    failing, fine = Failing(), Fine()
    cache.opened(failing, 8)
    cache.opened(fine, 8)
    cache.opened(object(), 1)  # type: ignore[arg-type]
    assert failing in cache and fine.closed and fine not in cache
