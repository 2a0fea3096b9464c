"""The recovery prescan of the segment engine: after an unclean shutdown (no clean-shutdown
marker) the last segment of every partition is scanned ahead on threads and
``LogSegment.recover`` takes the result for its own, unchanged file; a clean close writes the
marker and the next start scans nothing ahead. What a restart recovers is the same either way:
every intact batch, a torn or corrupt tail cut."""

from __future__ import annotations

import os
from pathlib import Path

from pydmq.engines.segment import SegmentStorageEngine
from pydmq.engines.segment.loader import RECOVERY_POINT_CHECKPOINT
from pydmq.engines.segment.prescan import (
    CLEAN_SHUTDOWN_MARKER,
    RecoveryPrescan,
    last_segment_files,
    scan_file,
)
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.testing.conformance import append_batches, fetched_bytes, make_batch

CONFIG = LogConfig(segment_bytes=1_000, index_interval_bytes=150)
BIG = 1 << 30
TPS = [TopicPartition("events", p) for p in range(4)]


def _fill(engine: SegmentStorageEngine, count: int = 30) -> dict[TopicPartition, list[bytes]]:
    out = {}
    for tp in TPS:
        log = engine.open_log(tp, CONFIG)
        batches = [make_batch(i * 2, 2, timestamp=1_000 + i, value_size=40) for i in range(count)]
        for batch in batches:
            append_batches(log, batch)
        out[tp] = batches
    return out


def _unclean(data_dir: Path) -> None:
    """What a crash before any flush leaves: no marker, no recovery point."""
    (data_dir / CLEAN_SHUTDOWN_MARKER).unlink()
    for tp in TPS:
        (data_dir / f"{tp.topic}-{tp.partition}" / RECOVERY_POINT_CHECKPOINT).unlink(
            missing_ok=True
        )


def _last_file(data_dir: Path, tp: TopicPartition) -> Path:
    return sorted((data_dir / f"{tp.topic}-{tp.partition}").glob("*.log"))[-1]


def test_unclean_restart_takes_the_scans_made_ahead(tmp_path: Path) -> None:
    engine = SegmentStorageEngine(str(tmp_path))
    written = _fill(engine)
    engine.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    _unclean(tmp_path)
    # A torn tail in one partition and a flipped byte in another: cut as without a prescan.
    torn = _last_file(tmp_path, TPS[1])
    os.truncate(torn, torn.stat().st_size - 30)
    flipped = _last_file(tmp_path, TPS[2])
    data = bytearray(flipped.read_bytes())
    data[-5] ^= 0xFF
    flipped.write_bytes(bytes(data))

    engine = SegmentStorageEngine(str(tmp_path))
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()  # a crash from now on is unclean
    for tp in TPS:
        log = engine.open_log(tp, CONFIG)
        kept = 29 if tp in (TPS[1], TPS[2]) else 30
        assert log.log_end_offset == kept * 2, tp
        assert fetched_bytes(log.read(0, BIG, BIG, True)) == b"".join(written[tp][:kept])
    assert engine.recovery_prescans_used() == len(TPS)
    engine.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()

    # After that clean close nothing is scanned ahead, and nothing needs recovery.
    engine = SegmentStorageEngine(str(tmp_path))
    for tp in TPS:
        assert engine.open_log(tp, CONFIG).recovered_segments == 0
    assert engine.recovery_prescans_used() == 0
    engine.close()


def test_a_scan_of_a_file_that_changed_since_is_not_taken(tmp_path: Path) -> None:
    engine = SegmentStorageEngine(str(tmp_path))
    _fill(engine, 5)
    engine.close()
    dirs = [str(tmp_path / f"{tp.topic}-{tp.partition}") for tp in TPS]
    files = last_segment_files(dirs)
    assert [Path(p).parent.name for p, _ in files] == [f"events-{p}" for p in range(4)]
    prescan = RecoveryPrescan(files, threads=2, lookahead=2)
    first, second = files[0][0], files[1][0]
    fd = os.open(first, os.O_RDONLY)
    try:
        taken = prescan.take(first, fd)
        assert taken is not None and taken == scan_file(first, files[0][1])[1:]
        assert prescan.take(first, fd) is None  # taken once
    finally:
        os.close(fd)
    prescan._futures[1].result()  # the scan of the second file is done
    with open(second, "ab") as f:
        f.write(b"\x00" * 7)  # changed after (or while) it was scanned
    fd = os.open(second, os.O_RDONLY)
    try:
        assert prescan.take(second, fd) is None
        assert prescan.take("/not/scanned.log", fd) is None
    finally:
        os.close(fd)
    assert prescan.used == 1
    prescan.close()
