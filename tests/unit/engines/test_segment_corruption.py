"""Stray and damaged segment files: never served wrong, never dropped silently.

Each test writes a log of many segments, closes it cleanly (the recovery point at the log end:
everything was flushed), damages the files as a disk, an operator or a stray copy might, and
reopens it. A single node (``LogConfig.replicated`` False) sets empty strays aside, refuses to
open a log whose flushed data it cannot read at load, and fails only the reads over damage it
finds later; a replicated follower truncates before damage found at load.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pydmq.engines.segment import SegmentLog, SegmentStorageEngine
from pydmq.engines.segment.index import offset_key
from pydmq.protocol.records import iter_batch_headers
from pydmq.storage.api import LogConfig, StorageCorruptionError, TopicPartition
from pydmq.storage.log import UnifiedLog
from pydmq.testing.conformance import append_batches, fetched_bytes, make_batch

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("events", 3)
CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=150)
REPLICATED = replace(CONFIG, replicated=True)
BIG = 1 << 30
COUNT = 30  # batches of 2 records: offsets 0..59 in 5 segments


def batches() -> list[bytes]:
    return [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(COUNT)]


def written(data_dir: Path, config: LogConfig = CONFIG) -> list[bytes]:
    engine = SegmentStorageEngine(str(data_dir))
    log = engine.open_log(TP, config)
    all_batches = batches()
    for batch in all_batches:
        append_batches(log, batch)
    engine.close()  # clean: recovery point at the log end
    return all_batches


def reopen(data_dir: Path, config: LogConfig = CONFIG) -> tuple[SegmentStorageEngine, SegmentLog]:
    engine = SegmentStorageEngine(str(data_dir))
    try:
        return engine, engine.open_log(TP, config)
    except BaseException:
        engine.close()
        raise


def segment_files(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "events-3").glob("*.log"))


def batch_at(all_batches: list[bytes], offset: int) -> bytes:
    return all_batches[offset // 2]


def positions(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch of a segment file."""
    return [(h.position, h.size, h.base_offset) for h in iter_batch_headers(path.read_bytes())]


def damage(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def assert_reads(log: SegmentLog, all_batches: list[bytes], offsets: range) -> None:
    for offset in offsets:
        assert fetched_bytes(log.read(offset, 1, BIG, True)) == batch_at(all_batches, offset)


# -- strays ---------------------------------------------------------------------------------


def test_empty_stray_segment_inside_a_range_is_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    all_batches = written(tmp_path)
    stray = tmp_path / "events-3" / f"{21:020d}.log"  # inside a segment's offsets
    stray.touch()
    with caplog.at_level(logging.WARNING):
        engine, log = reopen(tmp_path)
    try:
        assert log.log_end_offset == 2 * COUNT
        assert_reads(log, all_batches, range(0, 2 * COUNT))
        assert not stray.exists() and Path(f"{stray}.stray").exists()
        assert any(
            str(stray) in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records
        )
        append_batches(log, make_batch(2 * COUNT, 2))
        assert log.log_end_offset == 2 * COUNT + 2
    finally:
        engine.close()


def test_stray_segment_with_overlapping_data_refuses_the_open(tmp_path: Path) -> None:
    written(tmp_path)
    files = segment_files(tmp_path)
    overlapping = files[0].parent / f"{3:020d}.log"  # a copy of a later segment, misnamed
    shutil.copyfile(files[2], overlapping)
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert str(overlapping) in str(err.value) and str(files[0]) in str(err.value)
    assert overlapping.exists() and overlapping.stat().st_size > 0  # nothing was changed


def test_segment_whose_first_batch_is_below_its_name_refuses_the_open(tmp_path: Path) -> None:
    written(tmp_path)
    files = segment_files(tmp_path)
    shutil.copyfile(files[3], files[4])  # the file named after offset B4 holds B3's batches
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert str(files[4]) in str(err.value) and "base offset" in str(err.value)


# -- damage below the recovery point found at open -----------------------------------------------


def test_zeroed_segment_refuses_the_open_on_a_single_node(tmp_path: Path) -> None:
    written(tmp_path)
    victim = segment_files(tmp_path)[2]
    victim.write_bytes(b"\x00" * victim.stat().st_size)
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert err.value.path == str(victim) and err.value.position == 0
    assert str(victim) in str(err.value) and "byte 0" in str(err.value)
    assert victim.stat().st_size > 0  # nothing was cut


def test_zeroed_segment_of_a_follower_truncates_before_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    all_batches = written(tmp_path)
    files = segment_files(tmp_path)
    victim = files[2]
    base = int(victim.name[:20])
    victim.write_bytes(b"\x00" * victim.stat().st_size)
    with caplog.at_level(logging.WARNING):
        engine, log = reopen(tmp_path, REPLICATED)
    try:
        assert log.log_end_offset == base
        assert log.recovery_point == base
        assert_reads(log, all_batches, range(0, base))
        assert [Path(s.path) for s in log.segments] == files[:3]
        assert all(Path(f"{f}.stray").exists() for f in files[3:])  # set aside, not deleted
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any(str(victim) in m and f"truncating the log to offset {base}" in m for m in errors)
        append_batches(log, *all_batches[base // 2 :])  # fetched again from the leader
        assert_reads(log, all_batches, range(0, 2 * COUNT))
    finally:
        engine.close()
    engine, log = reopen(tmp_path)
    assert log.log_end_offset == 2 * COUNT and log.recovered_segments == 0
    engine.close()


def test_truncated_middle_segment_refuses_the_open(tmp_path: Path) -> None:
    written(tmp_path)
    victim = segment_files(tmp_path)[3]
    last_position = positions(victim)[-1][0]
    os.truncate(victim, last_position)  # the last batch is gone, at a batch boundary
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert str(victim) in str(err.value) and "flushed" in str(err.value)


def test_truncated_middle_segment_of_a_follower_truncates_the_log(tmp_path: Path) -> None:
    all_batches = written(tmp_path)
    files = segment_files(tmp_path)
    victim = files[3]
    last_position, _, last_base = positions(victim)[-1]
    os.truncate(victim, last_position + 20)  # torn inside the last batch
    engine, log = reopen(tmp_path, REPLICATED)
    try:
        assert log.log_end_offset == last_base
        assert_reads(log, all_batches, range(0, last_base))
        assert Path(f"{files[4]}.stray").exists()  # the later segment is set aside, not deleted
    finally:
        engine.close()


def test_missing_middle_segment_refuses_the_open(tmp_path: Path) -> None:
    written(tmp_path)
    victim = segment_files(tmp_path)[2]
    victim.unlink()
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert str(victim) in str(err.value) and "missing" in str(err.value)


def test_bit_flip_below_the_recovery_point_found_by_a_scan_refuses_the_open(
    tmp_path: Path,
) -> None:
    """Without the LMDB metadata every segment is scanned: a CRC mismatch below the recovery
    point is corruption, not a torn tail to cut away."""
    written(tmp_path)
    victim = segment_files(tmp_path)[1]
    position, size, _ = positions(victim)[1]
    damage(victim, position + size - 5, b"\xff")
    shutil.rmtree(tmp_path / ".index.lmdb")
    with pytest.raises(StorageCorruptionError) as err:
        reopen(tmp_path)
    assert err.value.position == position and "CRC" in str(err.value)
    assert victim.stat().st_size > position + size  # nothing was cut


# -- damage below the recovery point found on read (trusted segments are not scanned) ---------


def test_bit_flip_in_a_record_body_fails_only_the_reads_of_that_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    all_batches = written(tmp_path)
    victim = segment_files(tmp_path)[2]
    batches_here = positions(victim)
    position, size, bad = batches_here[1]
    damage(victim, position + size - 5, bytes([victim.read_bytes()[position + size - 5] ^ 0x10]))
    engine, log = reopen(tmp_path)
    try:
        assert log.log_end_offset == 2 * COUNT and log.recovered_segments == 0
        with caplog.at_level(logging.ERROR):
            # A read from the segment start returns the intact batch before the damage only.
            start = batches_here[0][2]
            assert fetched_bytes(log.read(start, BIG, BIG, True)) == batch_at(all_batches, start)
            for offset in (bad, bad + 1):
                with pytest.raises(StorageCorruptionError) as err:
                    log.read(offset, BIG, BIG, True)
                assert err.value.path == victim.as_posix() and err.value.position == position
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1  # logged once, not once per read
        assert str(victim) in errors[0] and f"byte {position}" in errors[0]
        assert_reads(log, all_batches, range(0, bad))
        assert_reads(log, all_batches, range(bad + 2, 2 * COUNT))
    finally:
        engine.close()


def test_zero_bytes_in_the_middle_of_a_segment(tmp_path: Path) -> None:
    all_batches = written(tmp_path)
    victim = segment_files(tmp_path)[1]
    batches_here = positions(victim)
    first_damaged = next(b for p, s, b in batches_here if p + s > 200)
    after = [b for p, _, b in batches_here if p >= 300]
    damage(victim, 200, b"\x00" * 100)
    engine, log = reopen(tmp_path)
    try:
        assert_reads(log, all_batches, range(0, first_damaged))
        with pytest.raises(StorageCorruptionError):
            log.read(first_damaged, BIG, BIG, True)
        # Every intact batch after the zeros is still served, in this segment and later ones.
        assert after
        assert_reads(log, all_batches, range(after[0], 2 * COUNT))
        # A consumer reading the whole log gets the batches up to the damage, then the error.
        data = fetched_bytes(log.read(0, BIG, BIG, True))
        assert data == b"".join(all_batches[: first_damaged // 2])
    finally:
        engine.close()


def test_zero_bytes_in_the_middle_of_a_follower_segment_truncate_at_open(tmp_path: Path) -> None:
    all_batches = written(tmp_path)
    victim = segment_files(tmp_path)[1]
    first_damaged = next(b for p, s, b in positions(victim) if p + s > 200)
    damage(victim, 200, b"\x00" * 100)
    engine, log = reopen(tmp_path, REPLICATED)
    try:
        assert log.log_end_offset == first_damaged
        assert_reads(log, all_batches, range(0, first_damaged))
    finally:
        engine.close()


def test_timestamp_lookups_over_damage_raise_the_storage_error(tmp_path: Path) -> None:
    written(tmp_path)
    engine, log = reopen(tmp_path)
    UnifiedLog(log).close()  # a producer snapshot at the log end: the next open replays nothing
    engine.close()
    victim = segment_files(tmp_path)[1]
    position, _, bad = positions(victim)[1]
    damage(victim, position, b"\x00" * 70)  # the second batch's header (no index entry)
    engine, log = reopen(tmp_path)
    try:
        with pytest.raises(StorageCorruptionError):
            log.fetch_offset_by_timestamp(1_000 + bad // 2)
        unified = UnifiedLog(log)
        with pytest.raises(StorageCorruptionError):
            unified.fetch_offset_by_timestamp(1_000 + bad // 2)
        found = unified.fetch_offset_by_timestamp(1_000)
        assert found is not None and found.offset == 0
    finally:
        engine.close()


# -- the index disagrees with the file -----------------------------------------------------------


def test_index_entry_pointing_past_the_file_end_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    all_batches = written(tmp_path)
    engine, log = reopen(tmp_path)
    segment = log.segments[1]
    entries = engine.index.offset_entries(segment.prefix)
    assert len(entries) >= 2
    engine.close()
    engine = SegmentStorageEngine(str(tmp_path))
    # A middle entry points past the end of the file (the last one stays right).
    engine.index.put([(offset_key(segment.prefix, entries[0][0]), 10**6)], [], [])
    try:
        log = engine.open_log(TP, CONFIG)
        with caplog.at_level(logging.WARNING):
            assert_reads(log, all_batches, range(0, 2 * COUNT))
        assert any("rebuilding" in r.getMessage() for r in caplog.records)
        assert engine.index.offset_entries(segment.prefix) == entries
    finally:
        engine.close()


def test_index_entry_naming_a_damaged_batch_steps_over_the_damage(tmp_path: Path) -> None:
    """The index is right, the file is damaged where an entry points: reads of the offsets
    after the damage that start from that entry are still served."""
    sparse = LogConfig(segment_bytes=2_000, index_interval_bytes=400)  # an entry per 3 batches
    all_batches = written(tmp_path, sparse)
    engine, log = reopen(tmp_path, sparse)
    segment = log.segments[0]
    entry_offset, entry_position = engine.index.offset_entries(segment.prefix)[0]
    engine.close()
    victim = segment_files(tmp_path)[0]
    # The end of the batch before the entry's and the header of the entry's batch.
    damage(victim, entry_position - 10, b"\x00" * 80)
    engine, log = reopen(tmp_path, sparse)
    try:
        # A consumer from the start meets the damage in the batch before the entry's first.
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(
            all_batches[: entry_offset // 2 - 1]
        )
        for offset in range(entry_offset - 2, entry_offset + 2):
            with pytest.raises(StorageCorruptionError):
                log.read(offset, BIG, BIG, True)
        assert_reads(log, all_batches, range(entry_offset + 2, 2 * COUNT))
        assert_reads(log, all_batches, range(0, entry_offset - 2))
    finally:
        engine.close()
