"""Shared helpers of the storage crash tests (test_failpoints.py and test_power_loss.py).

* The crash child (:data:`CHILD`, :data:`CASES`, :func:`run_child`, :func:`promised_end`) and
  the recovery checks (:func:`check_log`).
* A power-loss model: :class:`DiskTracker`, installed in the child, records what the engine
  made durable (file contents at each ``fsync``/``fdatasync``, directory listings at each
  directory ``fsync``) in a side directory; :func:`apply_power_loss` then builds, from the
  crashed tree, the tree a power loss at that moment could leave behind.

Only the standard library and pydmq are imported: the child imports this module by path.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydmq.engines.segment.engine import INDEX_DIR_NAME, SegmentStorageEngine
from pydmq.failpoints import ENV_VAR
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.storage.api import LogConfig, TopicPartition

TP = TopicPartition("crash", 0)
BASE_TS = 1_700_000_000_000
RECORDS_PER_BATCH = 3
SEGMENT_BYTES = 4096
INDEX_INTERVAL = 512


def config(retention_ms: int = -1) -> LogConfig:
    return LogConfig(
        segment_bytes=SEGMENT_BYTES,
        index_interval_bytes=INDEX_INTERVAL,
        retention_ms=retention_ms,
    )


# The child: appends ``batches`` batches, flushing every ``flush_every`` (and printing the
# promise), then optionally flushes once more and applies time retention. It must die at the
# failpoint before reaching the end; reaching the end exits 0 (the parent fails the test).
CHILD = textwrap.dedent(
    """
    import sys
    from pydmq.engines.segment.engine import SegmentStorageEngine
    from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
    from pydmq.storage.api import LogConfig, TopicPartition

    data_dir = sys.argv[1]
    batches, flush_every, retention, segment_bytes, interval, base_ts, per_batch = map(
        int, sys.argv[2:9]
    )
    engine = SegmentStorageEngine(data_dir, {"index.flush.ms": "0"})
    log = engine.open_log(
        TopicPartition("crash", 0),
        LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                  retention_ms=1 if retention else -1),
    )
    print("opened", log.log_end_offset, flush=True)
    for i in range(batches):
        base = log.log_end_offset
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % (base + j), (), base_ts + base + j)
             for j in range(per_batch)],
            base_offset=base,
        )
        log.append(batch, list(iter_batch_headers(batch)))
        if (i + 1) % flush_every == 0:
            log.flush()
            print("flushed", log.log_end_offset, flush=True)
    if retention:
        log.flush()
        print("flushed", log.log_end_offset, flush=True)
        log.delete_retention_ms_breached(base_ts + 10**12)
    print("finished", flush=True)
    """
)

# point -> (action, batches, flush_every, retention). Hit counts are chosen so that each
# crash happens with flushed data, unflushed data and (mostly) several segments behind it.
CASES: dict[str, tuple[str, int, int, int]] = {
    "segment.append.before_write": ("crash-after=40", 60, 7, 0),
    "segment.append.after_write": ("crash-after=40", 60, 7, 0),
    "index.put.before_commit": ("crash-after=25", 200, 7, 0),
    "index.put.after_commit": ("crash-after=25", 200, 7, 0),
    "segment.roll.before": ("crash-after=3", 200, 7, 0),
    "segment.roll.after": ("crash-after=3", 200, 7, 0),
    "checkpoint.rename.before": ("crash-after=4", 60, 7, 0),
    "checkpoint.rename.after": ("crash-after=4", 60, 7, 0),
    "retention.delete.segment": ("crash-after=2", 200, 7, 1),
    "segment.append.write": ("crash-after=40", 60, 7, 0),
    "segment.fsync": ("crash-after=4", 60, 7, 0),
    "segment.create": ("crash-after=3", 200, 7, 0),
    "index.commit": ("crash-after=25", 200, 7, 0),
    "index.sync": ("crash-after=4", 60, 7, 0),
    "checkpoint.write": ("crash-after=4", 60, 7, 0),
    "checkpoint.fsync": ("crash-after=12", 60, 7, 0),  # file and directory fsyncs
    "checkpoint.rename": ("crash-after=4", 60, 7, 0),
}

# Points outside the segment engine (the Raft metadata log and the quorum state): covered by
# tests/unit/raft, not by this child.
NOT_SEGMENT_ENGINE = frozenset({"raft.append.write", "raft.fsync", "quorum_state.write"})
# Points of a compaction swap: reached by the cleaning child of test_compaction_power_loss.py.
COMPACTION_POINTS = frozenset(
    {
        "cleaner.cleaned.fsync",
        "cleaner.swap.before_rename",
        "cleaner.swap.renamed",
        "cleaner.swap.index_dropped",
        "cleaner.swap.delete.segment",
        "cleaner.swap.after_rename",
        "cleaner.swap.done",
    }
)


def run_child(data_dir: Path, point: str, prelude: str = "") -> tuple[int, list[str], str]:
    """Run :data:`CHILD` (after ``prelude``) with ``point`` armed: (status, stdout lines, stderr)."""
    action, batches, flush_every, retention = CASES[point]
    env = {**os.environ, ENV_VAR: f"{point}={action}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            prelude + CHILD,
            str(data_dir),
            *map(str, (batches, flush_every, retention, SEGMENT_BYTES, INDEX_INTERVAL)),
            *map(str, (BASE_TS, RECORDS_PER_BATCH)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def promised_end(lines: list[str]) -> int:
    promised = 0
    for line in lines:
        word, _, value = line.partition(" ")
        if word == "flushed":
            promised = int(value)
    return promised


def check_log(data_dir: Path, promised: int, *, retention: bool) -> tuple[int, int]:
    """Reopen and check every invariant; returns (log start, log end)."""
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, config())
        start, end = log.log_start_offset, log.log_end_offset
        assert end >= promised, f"flushed up to {promised} but the log ends at {end}"
        if not retention:
            assert start == 0
        # Whole log, segment by segment: contiguous, whole, CRC-valid batches.
        expected = start
        segments = log.segments
        assert segments[0].base_offset <= start
        for segment in segments:
            size = os.path.getsize(segment.path)
            assert size == segment.size, f"{segment.path}: file {size} B, tracked {segment.size}"
            raw = open(segment.path, "rb").read()  # noqa: SIM115
            headers = list(iter_batch_headers(raw))  # a torn batch raises here
            for h in headers:
                validate_crc(raw, h)
                if h.base_offset >= start:
                    assert h.base_offset == expected, (segment.path, h.base_offset, expected)
                expected = max(expected, h.next_offset)
            # Index entries point at the header of the batch they name.
            by_position = {h.position: h for h in headers}
            for offset, position in engine.index.offset_entries(segment.prefix):
                assert position in by_position, f"index entry {offset}->{position} is no batch"
                assert by_position[position].base_offset == offset
        assert expected == end, f"batches end at {expected}, log end offset is {end}"
        # Every offset reads back as the batch containing it, with its own value.
        batch_ts: list[tuple[int, int]] = []
        for offset in range(start, end):
            info = log.read(offset, 1, end, True)
            buf = b"".join(bytes(b) for b in info.buffers)
            (h,) = list(iter_batch_headers(buf))
            validate_crc(buf, h)
            assert h.base_offset <= offset <= h.last_offset
            values = {r.offset: r.value for r in decode_records(buf, h)}
            assert values[offset] == b"v%d" % offset
            if h.base_offset == offset or offset == start:
                batch_ts.append((h.max_timestamp, h.base_offset))
        # Timestamp lookups through the time index: the first batch reaching each timestamp.
        for max_ts, base in batch_ts:
            found = log.fetch_offset_by_timestamp(max_ts)
            assert found is not None and found.offset == max(base, start), (max_ts, found, base)
        assert log.fetch_offset_by_timestamp(BASE_TS + end + 10) is None
        # The log accepts new appends.
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % (end + j), (), BASE_TS + end + j) for j in range(2)],
            base_offset=end,
        )
        log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        assert log.log_end_offset == end + 2
    finally:
        engine.close()
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, config())
        assert log.log_end_offset == end + 2
        assert log.recovered_segments == 0, "a clean close needed recovery"
        info = log.read(end + 1, 1, end + 2, True)
        buf = b"".join(bytes(b) for b in info.buffers)
        (h,) = list(iter_batch_headers(buf))
        assert {r.offset: r.value for r in decode_records(buf, h)}[end + 1] == b"v%d" % (end + 1)
    finally:
        engine.close()
    return start, end


# -- power-loss model -------------------------------------------------------------------------
#
# A power loss keeps, of everything under the tracked root:
#
# * a directory's entries as they were at its last fsync (entries created, renamed or unlinked
#   since come back as they were: a new name vanishes, an unlinked name reappears, a replaced
#   name points at its old file again); a directory never fsynced since its creation is empty;
# * a file's content as it was at its last fsync/fdatasync (nothing if it was never synced);
#   what was written since is lost: cut off ("truncate"), or, as on file systems that extend
#   the size before the data reaches the disk, left as zeros ("zero") or garbage ("garbage")
#   up to the length the file had at the crash.
#
# Directory entries may also be kept as they were at the crash ("kept" names) while the data
# is not: a journaling file system commits metadata on its own schedule, so a file created or
# extended since its last sync may be there, empty or short.
#
# The LMDB environment (``.index.lmdb``, written by C code the tracker cannot see) is left out of
# that model and is, as a whole: kept as the crash left it ("kept"), as it was at the last
# ``LogIndex.sync`` ("synced") or gone ("lost").

JOURNAL = "journal.jsonl"
CONTENT_DIR = "content"
LMDB_SNAPSHOT = "lmdb-data.mdb"
TAIL_MODES = ("truncate", "zero", "garbage")
NAME_MODES = ("synced", "kept")
LMDB_MODES = ("kept", "synced", "lost")


class DiskTracker:
    """Records in ``side`` what is durable under ``root`` (wraps os.open/close/fsync/fdatasync).

    Files are identified by an id given at creation (inode numbers are reused); a file's
    durable content is stored as ``side/content/<id>`` at each sync, a directory's durable
    entries as a journal line at each directory fsync. The journal is written unbuffered, so
    it is complete when the process dies with ``os._exit``.
    """

    def __init__(self, root: str | Path, side: str | Path) -> None:
        self.root = os.path.abspath(root)
        self.side = os.path.abspath(side)
        os.makedirs(os.path.join(self.side, CONTENT_DIR), exist_ok=True)
        self._journal = open(os.path.join(self.side, JOURNAL), "ab", buffering=0)  # noqa: SIM115
        self._ids: dict[int, int] = {}  # inode -> id of the file that has it now
        self._next_id = 1
        self._paths: dict[int, str] = {}  # tracked fd -> path
        self._saved: dict[str, Any] = {}
        self._saved_sync: Any = None

    # -- installation ------------------------------------------------------------------

    def install(self) -> None:
        """Take the current tree as durable and start recording; wrap the os functions."""
        os.makedirs(self.root, exist_ok=True)
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d != INDEX_DIR_NAME]
            for name in filenames:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    self._store(self._new_id(os.lstat(path).st_ino, path), f.read())
            self._dir_synced(dirpath)
        real_open, real_close = os.open, os.close
        real_fsync, real_fdatasync = os.fsync, os.fdatasync
        self._saved = {
            "open": real_open,
            "close": real_close,
            "fsync": real_fsync,
            "fdatasync": real_fdatasync,
        }

        def tracked_open(path: Any, flags: int, mode: int = 0o777, **kw: Any) -> int:
            full = "" if kw.get("dir_fd") is not None else os.path.abspath(os.fspath(path))
            tracked = bool(full) and self._tracked(full)
            created = tracked and bool(flags & os.O_CREAT) and not os.path.lexists(full)
            fd = real_open(path, flags, mode, **kw)
            if tracked:
                self._paths[fd] = full
                if created:
                    self._new_id(os.fstat(fd).st_ino, full)
            return fd

        def tracked_close(fd: int) -> None:
            self._paths.pop(fd, None)
            real_close(fd)

        def wrap_sync(real: Callable[[Any], None]) -> Callable[[Any], None]:
            def sync(fd: Any) -> None:
                real(fd)
                fd = fd if isinstance(fd, int) else fd.fileno()
                if fd in self._paths:
                    self._synced(fd)

            return sync

        os.open = tracked_open
        os.close = tracked_close
        os.fsync = wrap_sync(real_fsync)  # type: ignore[assignment]
        os.fdatasync = wrap_sync(real_fdatasync)  # type: ignore[assignment]

    def snapshot_lmdb_on_sync(self) -> None:
        """Copy the LMDB data file after every ``LogIndex.sync`` (its durable state)."""
        from pydmq.engines.segment.index import LogIndex

        real_sync = LogIndex.sync
        side = self.side

        def sync(index: LogIndex) -> None:
            real_sync(index)
            tmp = os.path.join(side, LMDB_SNAPSHOT + ".tmp")
            shutil.copyfile(os.path.join(index.path, "data.mdb"), tmp)
            os.replace(tmp, os.path.join(side, LMDB_SNAPSHOT))

        LogIndex.sync = sync  # type: ignore[method-assign,assignment]
        self._saved_sync = real_sync

    def uninstall(self) -> None:
        """Restore what :meth:`install` and :meth:`snapshot_lmdb_on_sync` replaced."""
        for name, fn in self._saved.items():
            setattr(os, name, fn)
        self._saved = {}
        if self._saved_sync is not None:
            from pydmq.engines.segment.index import LogIndex

            LogIndex.sync = self._saved_sync  # type: ignore[method-assign]
            self._saved_sync = None
        self._journal.close()

    # -- recording ----------------------------------------------------------------------

    def _tracked(self, path: str) -> bool:
        rel = os.path.relpath(path, self.root)
        return not rel.startswith("..") and INDEX_DIR_NAME not in rel.split(os.sep)

    def _log(self, **entry: Any) -> None:
        self._journal.write(json.dumps(entry).encode() + b"\n")

    def _new_id(self, inode: int, path: str) -> int:
        file_id = self._next_id
        self._next_id += 1
        self._ids[inode] = file_id
        self._log(op="create", inode=inode, id=file_id, path=os.path.relpath(path, self.root))
        return file_id

    def _id(self, inode: int, path: str) -> int:
        file_id = self._ids.get(inode)
        return self._new_id(inode, path) if file_id is None else file_id

    def _store(self, file_id: int, content: bytes) -> None:
        path = os.path.join(self.side, CONTENT_DIR, str(file_id))
        with open(path + ".tmp", "wb") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
        self._log(op="filesync", id=file_id, size=len(content))

    def _synced(self, fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self._dir_synced(self._paths[fd])
        elif stat.S_ISREG(st.st_mode):
            with open(f"/proc/self/fd/{fd}", "rb") as f:  # the inode, wherever it is now
                content = f.read()
            self._store(self._id(st.st_ino, self._paths[fd]), content)

    def _dir_synced(self, path: str) -> None:
        entries: dict[str, dict[str, Any]] = {}
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    entries[entry.name] = {"dir": True}
                elif entry.is_file(follow_symlinks=False):
                    inode = entry.inode()
                    entries[entry.name] = {"id": self._id(inode, entry.path)}
        self._log(op="dirsync", dir=os.path.relpath(path, self.root), entries=entries)


def tracker_prelude(root: Path, side: Path) -> str:
    """Child code that installs a :class:`DiskTracker` (and LMDB snapshots) before the run."""
    return textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import crash_support
        _tracker = crash_support.DiskTracker({str(root)!r}, {str(side)!r})
        _tracker.install()
        _tracker.snapshot_lmdb_on_sync()
        """
    )


def apply_power_loss(
    crashed: Path,
    side: Path,
    target: Path,
    *,
    tail: str,
    lmdb: str,
    names: str = "synced",
    seed: int = 0,
) -> None:
    """Build in ``target`` (absent) what a power loss could leave of the ``crashed`` root.

    ``tail`` ("truncate", "zero" or "garbage") is what unsynced bytes of a surviving file
    become; ``lmdb`` ("kept", "synced" or "lost") what becomes of the ``.index.lmdb`` of a
    surviving directory (whether or not that directory's last fsync listed it); ``names``
    ("synced" or "kept") whether directories hold the entries of their last fsync or, as a
    journaling file system that committed its metadata but not the data may leave them, the
    entries they had at the crash (with the files' contents still those of their last sync).
    """
    assert tail in TAIL_MODES and lmdb in LMDB_MODES and names in NAME_MODES
    ids: dict[int, int] = {}  # inode -> id of the file that had it last
    synced: set[int] = set()
    dirs: dict[str, dict[str, dict[str, Any]]] = {}
    with open(side / JOURNAL, "rb") as f:
        for line in f:
            entry = json.loads(line)
            if entry["op"] == "create":
                ids[entry["inode"]] = entry["id"]
            elif entry["op"] == "filesync":
                synced.add(entry["id"])
            else:
                dirs[entry["dir"]] = entry["entries"]
    rng = random.Random(seed)

    def entries(rel: str) -> dict[str, dict[str, Any]]:
        if names == "synced":
            return dirs.get(rel, {})
        found: dict[str, dict[str, Any]] = {}
        with os.scandir(crashed / rel) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    found[entry.name] = {"dir": True}
                else:
                    found[entry.name] = {"id": ids.get(entry.inode())}
        return found

    def build(rel: str) -> None:
        os.makedirs(target / rel)
        for name, entry in entries(rel).items():
            sub = os.path.normpath(os.path.join(rel, name))
            if name == INDEX_DIR_NAME:
                continue  # below
            if entry.get("dir"):
                build(sub)
                continue
            content = b""
            if entry["id"] in synced:
                content = (side / CONTENT_DIR / str(entry["id"])).read_bytes()
            if tail != "truncate":
                try:
                    st = os.lstat(crashed / sub)
                except FileNotFoundError:
                    pass
                else:
                    extra = st.st_size - len(content)
                    if ids.get(st.st_ino) == entry["id"] and extra > 0:
                        content += b"\0" * extra if tail == "zero" else rng.randbytes(extra)
            (target / sub).write_bytes(content)
        index = os.path.join(rel, INDEX_DIR_NAME)
        if lmdb == "kept" and (crashed / index).is_dir():
            shutil.copytree(crashed / index, target / index)
        elif lmdb == "synced" and (crashed / index).is_dir() and (side / LMDB_SNAPSHOT).exists():
            os.mkdir(target / index)
            shutil.copyfile(side / LMDB_SNAPSHOT, target / index / "data.mdb")

    build(".")
