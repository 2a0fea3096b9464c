"""Segment-engine specifics: files, zero-copy reads, index batching and crash recovery."""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path

import pytest

from pydmq.engines.segment import SegmentLog, SegmentStorageEngine
from pydmq.engines.segment.index import offset_key
from pydmq.engines.segment.loader import RECOVERY_POINT_CHECKPOINT
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.testing.conformance import append_batches, fetched_bytes, make_batch

TP = TopicPartition("events", 3)
CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=150)
BIG = 1 << 30


def open_log(data_dir: Path, **options: str) -> tuple[SegmentStorageEngine, SegmentLog]:
    engine = SegmentStorageEngine(str(data_dir), options)
    return engine, engine.open_log(TP, CONFIG)


def fill(log: SegmentLog, count: int = 30) -> list[bytes]:
    batches = [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(count)]
    for batch in batches:
        append_batches(log, batch)
    return batches


def log_dir(data_dir: Path) -> Path:
    return data_dir / "events-3"


def segment_files(data_dir: Path) -> list[Path]:
    return sorted(log_dir(data_dir).glob("*.log"))


def unclean(data_dir: Path) -> None:
    """Forget the recovery point, as after a crash before any flush."""
    (log_dir(data_dir) / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)


def check_prefix(log: SegmentLog, batches: list[bytes], count: int) -> None:
    assert log.log_end_offset == count * 2
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches[:count])
    for i in range(0, count, 3):
        assert fetched_bytes(log.read(i * 2 + 1, 1, BIG, True)) == batches[i]


def test_segment_files_roll_by_size_and_are_named_by_base_offset(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    names = [p.name for p in segment_files(tmp_path)]
    assert names[0] == "00000000000000000000.log" and len(names) > 3
    assert all(p.stat().st_size <= CONFIG.segment_bytes for p in segment_files(tmp_path))
    assert [s.base_offset for s in log.segments] == [int(n[:20]) for n in names]
    check_prefix(log, batches, 30)
    engine.close()


def test_closed_segments_are_read_zero_copy(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    fill(log)
    info = log.read(0, 100, BIG, True)
    assert isinstance(info.buffers[0], memoryview)
    del info
    engine.close()


def test_index_entries_are_sparse_and_batched(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path, **{"index.flush.ms": "3600000"})
    fill(log, 5)  # fits in the first segment: entries stay in memory
    first = log.segments[0]
    assert engine.index.offset_entries(first.prefix) == []
    assert fetched_bytes(log.read(9, 1, BIG, True)) == make_batch(
        8, 2, timestamp=1_004, value_size=40
    )
    log.flush()
    entries = engine.index.offset_entries(first.prefix)
    assert 0 < len(entries) < 5
    engine.close()


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    engine.close()
    last = segment_files(tmp_path)[-1]
    os.truncate(last, last.stat().st_size - 30)
    unclean(tmp_path)
    engine, log = open_log(tmp_path)
    check_prefix(log, batches, 29)
    assert log.truncated_bytes > 0
    append_batches(log, batches[29])
    check_prefix(log, batches, 30)
    engine.close()


def test_garbage_after_clean_shutdown_is_truncated(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    engine.close()
    with open(segment_files(tmp_path)[-1], "ab") as f:
        f.write(b"\x00\x01garbage" * 10)
    engine, log = open_log(tmp_path)
    check_prefix(log, batches, 30)
    assert log.truncated_bytes == 90
    engine.close()


def test_flipped_byte_in_last_batch_fails_crc(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    engine.close()
    last = segment_files(tmp_path)[-1]
    data = bytearray(last.read_bytes())
    data[-5] ^= 0xFF
    last.write_bytes(bytes(data))
    unclean(tmp_path)
    engine, log = open_log(tmp_path)
    check_prefix(log, batches, 29)
    engine.close()


def test_corrupt_middle_segment_drops_the_rest(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    engine.close()
    files = segment_files(tmp_path)
    victim = files[1]
    data = bytearray(victim.read_bytes())
    data[200] ^= 0xFF
    victim.write_bytes(bytes(data))
    unclean(tmp_path)
    engine, log = open_log(tmp_path)
    assert len(segment_files(tmp_path)) == 2
    kept = log.log_end_offset // 2
    assert 0 < kept < 30
    check_prefix(log, batches, kept)
    engine.close()


@pytest.mark.parametrize("damage", ["delete", "garbage"])
def test_lost_or_corrupt_lmdb_is_rebuilt(tmp_path: Path, damage: str) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    engine.close()
    env = tmp_path / ".index.lmdb"
    if damage == "delete":
        shutil.rmtree(env)
    else:
        (env / "data.mdb").write_bytes(b"\xde\xad" * 5_000)
    engine, log = open_log(tmp_path)
    assert engine.index.rebuilt
    check_prefix(log, batches, 30)
    found = log.fetch_offset_by_timestamp(1_020)
    assert found is not None and found.offset == 40
    assert engine.index.offset_entries(log.segments[0].prefix)
    engine.close()


def test_index_entries_beyond_log_end_are_removed(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    active = log.segments[-1]
    prefix, end = active.prefix, log.log_end_offset
    engine.close()
    engine = SegmentStorageEngine(str(tmp_path), {})
    engine.index.put(
        [(offset_key(prefix, end + 10), 5_000), (offset_key(prefix, end + 20), 9_000)], [], []
    )
    log = engine.open_log(TP, CONFIG)
    assert all(o < end for o, _ in engine.index.offset_entries(prefix))
    check_prefix(log, batches, 30)
    engine.close()


def test_bogus_index_position_forces_a_rescan(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    active = log.segments[-1]
    prefix, end = active.prefix, log.log_end_offset
    engine.close()
    engine = SegmentStorageEngine(str(tmp_path), {})
    # The last entry points past the file: the loader does not trust the segment's index.
    engine.index.put([(offset_key(prefix, end - 1), 10**6)], [], [])
    log = engine.open_log(TP, CONFIG)
    assert log.recovered_segments == 1
    check_prefix(log, batches, 30)
    engine.close()


def test_crash_without_close_recovers(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path, **{"index.flush.ms": "3600000"})
    batches = fill(log, 10)
    log.flush()
    for batch in batches[10:]:
        append_batches(log, batch)
    more = [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(10, 30)]
    for batch in more:
        append_batches(log, batch)
    # Crash: file descriptors go away, pending index entries and the recovery point are lost.
    for segment in log.segments:
        segment.close()
    engine.index._env.close()
    engine, log = open_log(tmp_path)
    assert log.recovered_segments >= 1
    check_prefix(log, batches[:10] + more, 30)
    engine.close()


def test_flush_every_message_and_reopen(tmp_path: Path) -> None:
    engine = SegmentStorageEngine(str(tmp_path), {})
    log = engine.open_log(TP, LogConfig(flush_messages=1))
    batches = fill(log, 5)
    engine.close()
    engine = SegmentStorageEngine(str(tmp_path), {})
    log = engine.open_log(TP, LogConfig(flush_messages=1))
    assert log.recovered_segments == 0
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches)
    engine.close()


def test_index_map_grows_when_full(tmp_path: Path) -> None:
    engine = SegmentStorageEngine(
        str(tmp_path), {"index.map.size": str(64 * 1024), "index.flush.ms": "0"}
    )
    log = engine.open_log(TP, LogConfig(index_interval_bytes=0))
    batches = [make_batch(i, timestamp=i, value_size=0) for i in range(3_000)]
    for i in range(0, 3_000, 100):
        append_batches(log, *batches[i : i + 100])
    log.flush()
    assert len(engine.index.offset_entries(log.segments[0].prefix)) == 3_000
    assert fetched_bytes(log.read(2_500, 1, BIG, True)) == batches[2_500]
    engine.close()


def test_retention_unlinks_files_but_views_stay_valid(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    held = log.read(0, 100, BIG, True)
    before = len(segment_files(tmp_path))
    assert log.delete_retention_ms_breached(10**12) == before - 1
    assert len(segment_files(tmp_path)) == 1
    assert fetched_bytes(held) == batches[0]
    del held
    engine.close()


def test_truncate_closed_segment_with_views_outstanding(tmp_path: Path) -> None:
    engine, log = open_log(tmp_path)
    batches = fill(log)
    held = log.read(0, BIG, BIG, True)
    log.truncate_to(4)
    assert fetched_bytes(held) == b"".join(batches)
    assert log.log_end_offset == 4 and len(segment_files(tmp_path)) == 1
    append_batches(log, batches[2])
    check_prefix(log, batches, 3)
    del held
    engine.close()
    engine, log = open_log(tmp_path)
    check_prefix(log, batches, 3)
    engine.close()


def mapped(buffer: bytes | memoryview) -> bool:
    return isinstance(buffer, memoryview) and isinstance(buffer.obj, mmap.mmap)


def test_large_reads_of_the_active_segment_are_views_that_survive_truncation(
    tmp_path: Path,
) -> None:
    engine = SegmentStorageEngine(str(tmp_path))
    log = engine.open_log(TP, LogConfig(segment_bytes=BIG))
    batches = [make_batch(i * 10, 10, value_size=4_000) for i in range(20)]  # ~40 KB each
    for batch in batches:
        append_batches(log, batch)
    assert len(log.segments) == 1  # everything below is read from the active segment
    tail = log.read(190, 100_000, BIG, True)
    assert not any(mapped(b) for b in tail.buffers)  # a tailing read: pread
    held = log.read(0, 600_000, BIG, True)
    assert all(mapped(b) for b in held.buffers)  # catching up: a view of the file, no copy
    log.truncate_to(50)
    assert fetched_bytes(held) == b"".join(batches[: len(fetched_bytes(held)) // len(batches[0])])
    assert log.log_end_offset == 50
    append_batches(log, batches[5])
    assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(batches[:6])
    del held, tail
    engine.close()


def crash(engine: SegmentStorageEngine, log: SegmentLog) -> None:
    """Die without close: no flush, no recovery point, no pending index entries."""
    for segment in log.segments:
        segment.close()
    engine.index._env.close()


def test_hole_left_by_a_lost_tail_ends_the_log(tmp_path: Path) -> None:
    """A power loss took a segment's unsynced tail but kept a later segment's file."""
    engine, log = open_log(tmp_path)
    batches = [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(30)]
    for batch in batches[:8]:
        append_batches(log, batch)
    log.flush()
    active = log.segments[-1]
    synced_path, synced_size = Path(active.path), active.size
    for batch in batches[8:]:
        append_batches(log, batch)
    assert synced_path.stat().st_size > synced_size and log.segments[-1] is not active
    crash(engine, log)
    os.truncate(synced_path, synced_size)  # the unsynced tail of that segment is gone
    engine, log = open_log(tmp_path)
    check_prefix(log, batches, 8)  # not 8 batches then a hole up to the next segment's base
    assert segment_files(tmp_path)[-1] == synced_path
    assert log.truncated_bytes > 0
    append_batches(log, batches[8])
    check_prefix(log, batches, 9)
    engine.close()


@pytest.mark.parametrize("flushed", [True, False])
def test_gap_between_segments_after_a_crash(tmp_path: Path, flushed: bool) -> None:
    """A gap (offsets skipped by the appender) between segments survives a crash once flushed;
    past the recovery point it cannot be told from a lost tail and ends the log."""
    engine, log = open_log(tmp_path)
    batches = [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(5)]
    for batch in batches:
        append_batches(log, batch)
    after_gap = make_batch(100, 2, timestamp=2_000, value_size=900)
    append_batches(log, after_gap)
    assert [s.base_offset for s in log.segments] == [0, 100]
    if flushed:
        log.flush()
    crash(engine, log)
    engine, log = open_log(tmp_path)
    if flushed:
        assert log.log_end_offset == 102
        assert fetched_bytes(log.read(10, BIG, BIG, True)) == after_gap
    else:
        assert log.log_end_offset == 10 and len(segment_files(tmp_path)) == 1
    for i, batch in enumerate(batches):
        assert fetched_bytes(log.read(i * 2 + 1, 1, BIG, True)) == batch
    engine.close()


def test_data_dir_is_fsynced_once_per_burst_of_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition directory entries are made durable by one data-dir fsync per burst of logs
    (before the first thing one of them promises), not one per log. A new log's directory is
    created by its first write, so the burst is one of first writes."""
    from pydmq.engines.segment import shared

    synced: list[str] = []
    real = shared.fsync_dir

    def counting(path: str) -> None:
        synced.append(path)
        real(path)

    monkeypatch.setattr(shared, "fsync_dir", counting)
    data = str(tmp_path.resolve())
    engine = SegmentStorageEngine(data)
    logs = [engine.open_log(TopicPartition("t", p), CONFIG) for p in range(5)]
    assert synced == []  # opening promises nothing
    assert not any(os.path.exists(log.dir) for log in logs)  # nor creates anything
    for log in logs:
        append_batches(log, make_batch(0, 2, timestamp=1_000))
    for log in logs:
        log.flush()
    assert synced == [data]
    new = engine.open_log(TopicPartition("t", 5), CONFIG)
    logs[0].flush()
    assert synced == [data]  # logs[0]'s entry is durable already
    new.write_checkpoint("x", b"1")
    assert synced == [data, data]
    engine.close()
    # Directories found at start may come from an open that crashed before its fsync: the first
    # promise fsyncs the data dir once, for all of them.
    synced.clear()
    engine = SegmentStorageEngine(data)
    logs = [engine.open_log(TopicPartition("t", p), CONFIG) for p in range(6)]
    for log in logs:
        append_batches(log, make_batch(log.log_end_offset, 2, timestamp=1_000))
        log.flush()
    assert synced == [data]
    engine.close()


def test_closing_many_logs_syncs_the_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = SegmentStorageEngine(str(tmp_path), {"index.flush.ms": "3600000"})
    logs = [engine.open_log(TopicPartition("t", p), CONFIG) for p in range(5)]
    for log in logs:
        fill(log, 3)
    syncs: list[bool] = []
    real = engine.index._env.sync
    monkeypatch.setattr(engine.index, "_env", _SyncCounter(engine.index._env, syncs, real))
    for log in logs:
        log.close()
    engine.close()
    assert syncs == [True]
    engine = SegmentStorageEngine(str(tmp_path))
    for p in range(5):
        log = engine.open_log(TopicPartition("t", p), CONFIG)
        assert log.recovered_segments == 0
        assert log.log_end_offset == 6
        first = log.segments[0]
        assert engine.index.offset_entries(first.prefix)  # written before the one sync
    engine.close()


class _SyncCounter:
    def __init__(self, env: object, syncs: list[bool], real: object) -> None:
        self._env = env
        self._syncs = syncs
        self._real = real

    def sync(self, force: bool = False) -> None:
        self._syncs.append(force)
        self._real(force)  # type: ignore[operator]

    def __getattr__(self, name: str) -> object:
        return getattr(self._env, name)
