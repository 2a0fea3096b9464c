"""Storage crash points under a simulated power loss: unsynced data is dropped, then recovery.

The child of ``test_failpoints.py`` (append, flush every few batches, print ``flushed <log end
offset>`` once each flush returned, die at a failpoint) runs once per point with a
:class:`~crash_support.DiskTracker` installed: it records, outside the data directory, each
file's content at its last ``fsync``/``fdatasync`` and each directory's entries at its last
directory ``fsync``. From the crashed tree, :func:`~crash_support.apply_power_loss` builds what a
power loss at that instant may leave:

* directories hold the entries of their last fsync (``synced`` names): a segment or checkpoint
  created or renamed since vanishes or reverts to the file it replaced, an unlinked one comes
  back; a directory never fsynced since it was created comes back empty (or not at all, if its
  parent's entry for it was never synced). Or, as a journaling file system that committed its
  metadata but not the data may leave them, directories hold their entries at the crash
  (``kept`` names) while the files' contents are still those of their last sync;
* each file holds its content of its last sync; the bytes written since are cut off
  (``truncate``) or, up to the length at the crash, zeros (``zero``) or garbage (``garbage``);
* the LMDB environment, written by C code out of the tracker's sight, is kept as the crash
  left it (``kept``), reverted to its last ``LogIndex.sync`` (``synced``) or lost (``lost``).

Every (point, tail, lmdb, names) combination then goes through the checks of
``test_failpoints.py`` (shared in ``crash_support.py``):
everything promised durable is present; the log is contiguous whole CRC-valid batches; reads,
index entries and timestamp lookups are right; new appends work and survive a clean reopen.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from crash_support import (
    BASE_TS,
    CASES,
    LMDB_MODES,
    NAME_MODES,
    TAIL_MODES,
    TP,
    DiskTracker,
    apply_power_loss,
    check_log,
    config,
    promised_end,
    run_child,
    tracker_prelude,
)

from pydmq.engines.segment.engine import INDEX_DIR_NAME, SegmentStorageEngine
from pydmq.failpoints import CRASH_EXIT_CODE
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.checkpoint import fsync_dir, write_atomically

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the tracker needs /proc"),
]


class Crashed:
    """One child run: the crashed tree (``root``), the tracker's record (``side``), stdout."""

    def __init__(self, base: Path, point: str) -> None:
        self.root = base / "disk"
        self.side = base / "side"
        self.point = point
        rc, self.lines, stderr = run_child(
            self.root / "data", point, tracker_prelude(self.root, self.side)
        )
        assert rc == CRASH_EXIT_CODE, f"child did not crash at {point} (rc {rc}):\n{stderr}"
        assert f"failpoint {point}" in stderr
        assert "finished" not in self.lines
        self.promised = promised_end(self.lines)
        assert self.promised > 0, f"no flush before the crash at {point}: nothing promised"


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Crashed]:
    """One child run per point, shared by that point's power-loss variants (lazily)."""

    class Runs(dict[str, Crashed]):
        def __missing__(self, point: str) -> Crashed:
            run = self[point] = Crashed(tmp_path_factory.mktemp(point), point)
            return run

    return Runs()


def segment_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in (data_dir / "crash-0").glob("*.log"))


@pytest.mark.parametrize("names", NAME_MODES)
@pytest.mark.parametrize("lmdb", LMDB_MODES)
@pytest.mark.parametrize("tail", TAIL_MODES)
@pytest.mark.parametrize("point", sorted(CASES))
def test_power_loss_at_failpoint_recovers(
    crashed: dict[str, Crashed], tmp_path: Path, point: str, tail: str, lmdb: str, names: str
) -> None:
    run = crashed[point]
    after = tmp_path / "after"
    apply_power_loss(run.root, run.side, after, tail=tail, lmdb=lmdb, names=names)
    data_dir = after / "data"
    assert (data_dir / "crash-0").is_dir(), (
        f"the log directory did not survive the power loss, {run.promised} offsets promised"
    )
    # After retention.delete.segment the log start may be back at 0: the unlinks and the log
    # start checkpoint were not yet durable, so the deleted segments come back.
    check_log(data_dir, run.promised, retention=CASES[point][3] == 1)


def test_power_loss_drops_unsynced_data(crashed: dict[str, Crashed], tmp_path: Path) -> None:
    """The model is not a no-op on the real run: the unsynced tail of the log is gone."""
    run = crashed["segment.append.after_write"]
    after = tmp_path / "after"
    apply_power_loss(run.root, run.side, after, tail="truncate", lmdb="kept")
    assert segment_bytes(after / "data") < segment_bytes(run.root / "data")
    engine = SegmentStorageEngine(str(after / "data"))
    try:
        log = engine.open_log(TP, config())
        crash_end = 40 * 3  # the 40th append reached the page cache before the crash
        assert run.promised <= log.log_end_offset < crash_end
        assert log.recovered_segments >= 1
    finally:
        engine.close()


# -- the model itself, in process -------------------------------------------------------------


@pytest.fixture
def tracked(tmp_path: Path) -> Iterator[tuple[DiskTracker, Path]]:
    root = tmp_path / "disk"
    root.mkdir()
    (root / "old").write_bytes(b"present at install")  # taken as durable
    tracker = DiskTracker(root, tmp_path / "side")
    tracker.install()
    try:
        yield tracker, root
    finally:
        tracker.uninstall()


def write_file(path: Path, data: bytes, *, sync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fdatasync(fd)
    finally:
        os.close(fd)


def power_loss(tmp_path: Path, tracker: DiskTracker, tail: str, lmdb: str = "lost") -> Path:
    target = tmp_path / f"after-{tail}-{lmdb}"
    apply_power_loss(Path(tracker.root), Path(tracker.side), target, tail=tail, lmdb=lmdb)
    return target


def listing(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def test_model_file_content_and_entries(tracked: tuple[DiskTracker, Path], tmp_path: Path) -> None:
    tracker, root = tracked
    write_file(root / "a", b"synced", sync=True)
    write_file(root / "b", b"never synced", sync=False)
    # No directory fsync yet: neither name is durable.
    for tail in TAIL_MODES:
        assert listing(power_loss(tmp_path / "1", tracker, tail)) == {"old": b"present at install"}
    fsync_dir(str(root))
    write_file(root / "a", b"+tail", sync=False)
    write_file(root / "c", b"after the dir fsync", sync=True)
    assert listing(power_loss(tmp_path / "2", tracker, "truncate")) == {
        "a": b"synced",
        "b": b"",
        "old": b"present at install",
    }
    zero = listing(power_loss(tmp_path / "2", tracker, "zero"))
    assert zero["a"] == b"synced\0\0\0\0\0" and zero["b"] == b"\0" * 12
    garbage = listing(power_loss(tmp_path / "2", tracker, "garbage"))
    assert garbage["a"].startswith(b"synced") and len(garbage["a"]) == 11


def test_model_renames_and_unlinks_revert(
    tracked: tuple[DiskTracker, Path], tmp_path: Path
) -> None:
    tracker, root = tracked
    write_atomically(str(root / "ckpt"), b"one")  # durable: file and directory fsynced
    (root / "old").unlink()
    write_atomically(str(root / "ckpt"), b"two", durable=False)
    # Durable temp file, rename not followed by a directory fsync.
    fd = os.open(root / "ckpt.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"three")
    os.fsync(fd)
    os.close(fd)
    os.replace(root / "ckpt.tmp", root / "ckpt")
    assert listing(root) == {"ckpt": b"three"}
    after = listing(power_loss(tmp_path, tracker, "zero"))
    assert after == {"ckpt": b"one", "old": b"present at install"}
    fsync_dir(str(root))
    assert listing(power_loss(tmp_path / "2", tracker, "zero")) == {"ckpt": b"three"}


def test_model_directories_and_lmdb(tracked: tuple[DiskTracker, Path], tmp_path: Path) -> None:
    tracker, root = tracked
    tracker.snapshot_lmdb_on_sync()
    engine = SegmentStorageEngine(str(root / "data"))
    try:
        engine.index.sync()
        (root / "data" / "sub").mkdir()
        write_file(root / "data" / "sub" / "f", b"x", sync=True)
        fsync_dir(str(root / "data"))
        fsync_dir(str(root))
        after = power_loss(tmp_path, tracker, "truncate", "synced")
        assert (after / "data" / "sub").is_dir() and not (after / "data" / "sub" / "f").exists()
        assert (after / "data" / INDEX_DIR_NAME / "data.mdb").is_file()
        assert not (
            power_loss(tmp_path, tracker, "truncate", "lost") / "data" / INDEX_DIR_NAME
        ).exists()
        kept = power_loss(tmp_path, tracker, "truncate", "kept") / "data" / INDEX_DIR_NAME
        assert (kept / "lock.mdb").is_file()
    finally:
        engine.close()


def test_new_directories_survive_a_power_loss_once_flushed(
    tracked: tuple[DiskTracker, Path], tmp_path: Path
) -> None:
    """The data directory (two new levels) and the log directory are durable after a flush."""
    tracker, root = tracked
    engine = SegmentStorageEngine(str(root / "a" / "data"))
    try:
        log = engine.open_log(TP, config())
        for base in range(0, 30, 3):
            batch = build_batch(
                [SimpleRecord(b"k", b"v%d" % (base + j), (), BASE_TS + base + j) for j in range(3)],
                base_offset=base,
            )
            log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        after = power_loss(tmp_path, tracker, "truncate", "lost")
    finally:
        engine.close()
    assert check_log(after / "a" / "data", 30, retention=False) == (0, 30)


def test_log_directory_left_by_a_crashed_open_survives_once_flushed(
    tracked: tuple[DiskTracker, Path], tmp_path: Path
) -> None:
    """A partition directory created by an engine that died before promising anything (so
    before its entry was fsynced) is made durable by the next engine's first flush."""
    tracker, root = tracked
    data = root / "data"
    crashed = SegmentStorageEngine(str(data))
    crashed.open_log(TP, config())  # creates crash-0/ and its first segment; never flushed
    crashed.index.close()  # the process "dies": nothing of the log is closed or flushed
    engine = SegmentStorageEngine(str(data))
    try:
        log = engine.open_log(TP, config())
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % j, (), BASE_TS + j) for j in range(3)], base_offset=0
        )
        log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        after = power_loss(tmp_path, tracker, "truncate", "lost")
    finally:
        engine.close()
    assert check_log(after / "data", 3, retention=False) == (0, 3)


def test_segments_recovered_at_open_are_fsynced_before_a_clean_close_promises_them(
    tracked: tuple[DiskTracker, Path], tmp_path: Path
) -> None:
    """After a kill -9 the unflushed tail is still in the page cache: the next open recovers it
    without fsyncing it. A clean close then moves the recovery point to the log end, so it must
    fsync those recovered segments first, or a later power loss takes batches it promised."""
    tracker, root = tracked
    data = root / "data"
    crashed = SegmentStorageEngine(str(data))
    log = crashed.open_log(TP, config())
    for base in range(0, 180, 3):
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % (base + j), (), BASE_TS + base + j) for j in range(3)],
            base_offset=base,
        )
        log.append(batch, list(iter_batch_headers(batch)))
    assert len(log.segments) > 1
    crashed.index.close()  # killed: nothing flushed
    engine = SegmentStorageEngine(str(data))
    try:
        log = engine.open_log(TP, config())
        assert log.recovered_segments == len(log.segments) > 1
        assert log.log_end_offset == 180
    finally:
        engine.close()  # clean: recovery point 180
    after = power_loss(tmp_path, tracker, "truncate", "synced")
    assert check_log(after / "data", 180, retention=False) == (0, 180)
