"""The metadata log on disk: append-only segment files plus atomically written snapshots.

Layout of the log directory (Kafka's names where it has them)::

    00000000000000000000.log                 segment, named by the offset of its first entry
    00000000000000004096.log
    00000000000000004096-0000000007.checkpoint   snapshot <end_offset>-<epoch>

A segment is a sequence of frames ``[length int32][crc32c uint32][offset int64][epoch int32]
[payload]``; ``length`` counts the bytes after the CRC and the CRC covers them. Recovery scans
every frame and cuts the log at the first frame that is torn (short), fails its CRC or breaks
the offset/epoch sequence: what follows a bad frame was never acknowledged as durable, since
``flush`` fsyncs in order. Snapshots are written with ``write_atomically`` (temp file, fsync,
rename, fsync of the directory), so a snapshot file is either whole or absent.

Write failures. An append whose write fails is undone (the segment is truncated back to its
size before it, positions and epoch cache untouched) and raises the OSError: the entries
were never in the log, so they cannot be acknowledged. A failed fsync undoes every entry
written since the last good flush the same way (they were refused, so a restart must not
replay them) and takes the log offline (:class:`MetadataLogOfflineError` from then on, for
every write, flush and read of the log end): a failed fsync may have lost pages that a later
fsync would wrongly vouch for, so the node must stop acknowledging entries until it restarts
(Kafka halts a node whose metadata log dir failed); recovery then scans every frame. An undo
whose truncation fails overwrites the first undone frame's header with zeros instead, which
recovery cuts as a torn tail (with everything after it), and takes the log offline; only if
that write fails too can the undone entries come back at a restart (logged at ERROR).

Owned by the task that drives the Raft core; nothing here is thread-safe.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
import struct
from collections.abc import Sequence

from pydmq.failpoints import SHORT, failpoint, torn_pwrite
from pydmq.protocol.records import crc32c
from pydmq.raft.log import (
    CorruptSnapshotError,
    Entry,
    EpochCache,
    PositionOutOfRangeError,
    RaftLogError,
    SnapshotId,
    SnapshotNotFoundError,
    check_append,
    check_read,
    check_snapshot,
    decode_snapshot,
    encode_snapshot,
    snapshot_id_of,
)
from pydmq.storage.checkpoint import fsync_dir, write_atomically
from pydmq.storage.errors import fsync

__all__ = ["FileRaftLog", "MetadataLogOfflineError"]

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">iIqi")  # length, crc32c, offset, epoch
_BODY_HEADER = struct.Struct(">qi")  # offset, epoch (the start of what the CRC covers)
_MAX_FRAME = 64 << 20  # a length above this is garbage, not an entry
_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def _segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def _snapshot_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}.checkpoint"


class MetadataLogOfflineError(RaftLogError):
    """The metadata log failed (an fsync or an undo failed): offline until a restart."""


class _Segment:
    """One segment file and the file position of each entry in it."""

    __slots__ = ("base_offset", "fd", "path", "positions", "size")

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.positions: list[int] = []
        self.size = 0

    @property
    def end_offset(self) -> int:
        return self.base_offset + len(self.positions)

    def close(self) -> None:
        os.close(self.fd)


class FileRaftLog:
    """A :class:`pydmq.raft.log.RaftLog` in a directory of segment files and snapshots."""

    def __init__(self, directory: str, *, segment_bytes: int = 8 << 20) -> None:
        self._dir = directory
        self._segment_bytes = segment_bytes
        os.makedirs(directory, exist_ok=True)
        self._segments: list[_Segment] = []
        self._unsynced: set[int] = set()  # base offsets of segments written since the last flush
        self._durable_end = 0  # the log end offset at the last good flush (or at recovery)
        self._snapshot: SnapshotId | None = None
        self._start = 0
        self._cache = EpochCache()
        self._offline: str | None = None  # what took the log offline
        self._recover()

    def _check_online(self) -> None:
        if self._offline is not None:
            raise MetadataLogOfflineError(f"metadata log {self._dir} is offline: {self._offline}")

    def _go_offline(self, what: str, exc: BaseException) -> MetadataLogOfflineError:
        self._offline = f"{what} failed: {exc}"
        return MetadataLogOfflineError(f"metadata log {self._dir} is offline: {self._offline}")

    # -- recovery -----------------------------------------------------------------------

    def _recover(self) -> None:
        names = sorted(os.listdir(self._dir))
        for name in names:
            if name.endswith(".tmp"):
                os.unlink(os.path.join(self._dir, name))
        self._snapshot = self._recover_snapshot(names)
        bases = sorted(int(m.group(1)) for n in names if (m := _SEGMENT_RE.match(n)))
        expected_offset: int | None = None
        last_epoch = 0
        for i, base in enumerate(bases):
            if expected_offset is not None and base != expected_offset:
                # A gap between segments: everything from here on is unusable.
                self._delete_segment_files(bases[i:])
                break
            segment = _Segment(os.path.join(self._dir, _segment_name(base)), base)
            self._segments.append(segment)
            clean, last_epoch = self._scan(segment, last_epoch)
            expected_offset = segment.end_offset
            if not clean:
                self._delete_segment_files(bases[i + 1 :])
                break
        self._reconcile_with_snapshot()
        if not self._segments:
            self._new_segment(self._start)
        self._rebuild_cache()
        self._durable_end = self._segments[-1].end_offset

    def _recover_snapshot(self, names: list[str]) -> SnapshotId | None:
        """The newest snapshot that parses; corrupt or older ones are deleted."""
        found = sorted(
            (SnapshotId(int(m.group(1)), int(m.group(2))), n)
            for n in names
            if (m := _SNAPSHOT_RE.match(n))
        )
        chosen: SnapshotId | None = None
        for snapshot_id, name in reversed(found):
            path = os.path.join(self._dir, name)
            if chosen is None:
                try:
                    with open(path, "rb") as f:
                        decoded = snapshot_id_of(f.read())
                    if decoded == snapshot_id:
                        chosen = snapshot_id
                        continue
                except CorruptSnapshotError:
                    pass
            os.unlink(path)
        return chosen

    def _scan(self, segment: _Segment, last_epoch: int) -> tuple[bool, int]:
        """Index the frames of ``segment``; cut it at the first bad one. True if all good."""
        with open(segment.path, "rb") as f:
            data = f.read()
        pos = 0
        expected = segment.base_offset
        while pos < len(data):
            if pos + _FRAME.size > len(data):
                break
            length, crc, offset, epoch = _FRAME.unpack_from(data, pos)
            end = pos + 8 + length
            if length < _BODY_HEADER.size or length > _MAX_FRAME or end > len(data):
                break
            if crc32c(memoryview(data)[pos + 8 : end]) != crc:
                break
            if offset != expected or epoch < last_epoch:
                break
            segment.positions.append(pos)
            expected += 1
            last_epoch = epoch
            pos = end
        segment.size = pos
        if pos < len(data):
            os.ftruncate(segment.fd, pos)
            os.fsync(segment.fd)
            return False, last_epoch
        return True, last_epoch

    def _reconcile_with_snapshot(self) -> None:
        """Start the log at the snapshot; keep the segments only if they agree with it."""
        snapshot = self._snapshot
        first = self._segments[0].base_offset if self._segments else 0
        if snapshot is None:
            if first != 0:
                raise RaftLogError(f"log starts at {first} and there is no snapshot")
            self._start = 0
            return
        self._start = snapshot.end_offset
        end = self._segments[-1].end_offset if self._segments else 0
        last_in_snapshot = snapshot.end_offset - 1
        agrees = first <= last_in_snapshot < end and (
            self._read_one(last_in_snapshot).epoch == snapshot.epoch
        )
        if snapshot.end_offset == first or agrees:
            self._drop_segments_below(snapshot.end_offset)
            return
        # The log does not reach the snapshot or disagrees with it (a crash during
        # install_snapshot): the snapshot wins.
        self._delete_segment_files([s.base_offset for s in self._segments])
        self._segments.clear()

    def _rebuild_cache(self) -> None:
        self._cache = EpochCache(self._snapshot)
        for segment in self._segments:
            for index in range(len(segment.positions)):
                offset = segment.base_offset + index
                if offset >= self._start:
                    self._cache.assign(self._read_header(segment, index)[1], offset)

    # -- segments -----------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> _Segment:
        segment = _Segment(os.path.join(self._dir, _segment_name(base_offset)), base_offset)
        self._segments.append(segment)
        fsync_dir(self._dir)
        return segment

    def _delete_segment_files(self, bases: Sequence[int]) -> None:
        for base in bases:
            self._unsynced.discard(base)
            for segment in self._segments:
                if segment.base_offset == base:
                    segment.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self._dir, _segment_name(base)))
        if bases:
            fsync_dir(self._dir)

    def _drop_segments_below(self, offset: int) -> None:
        """Delete segments whose every entry is below ``offset`` (never the last one)."""
        doomed = [s for s in self._segments[:-1] if s.end_offset <= offset]
        if doomed:
            self._delete_segment_files([s.base_offset for s in doomed])
            self._segments = self._segments[len(doomed) :]

    def _locate(self, offset: int) -> tuple[_Segment, int]:
        for segment in reversed(self._segments):
            if segment.base_offset <= offset:
                return segment, offset - segment.base_offset
        raise RaftLogError(f"offset {offset} is not in the log")

    def _read_header(self, segment: _Segment, index: int) -> tuple[int, int, int]:
        """``(offset, epoch, frame length)`` of the entry at ``index`` of ``segment``."""
        raw = os.pread(segment.fd, _FRAME.size, segment.positions[index])
        length, _, offset, epoch = _FRAME.unpack(raw)
        return offset, epoch, length

    def _read_one(self, offset: int) -> Entry:
        return self._read_range(offset, 0)[0]

    def _read_range(self, from_offset: int, max_bytes: int) -> list[Entry]:
        """Entries from ``from_offset``: at least one, then while they fit in ``max_bytes``.

        A frame is exactly :attr:`Entry.size` bytes, so the positions tell which entries fit
        before any byte is read.
        """
        out: list[Entry] = []
        budget = max_bytes
        offset = from_offset
        end = self.log_end_offset
        while offset < end:
            segment, index = self._locate(offset)
            first = segment.positions[index]
            stop = max(index + 1, bisect.bisect_right(segment.positions, first + budget))
            last = segment.positions[stop] if stop < len(segment.positions) else segment.size
            raw = os.pread(segment.fd, last - first, first)
            pos = 0
            for _ in range(index, stop):
                length, _, entry_offset, epoch = _FRAME.unpack_from(raw, pos)
                entry = Entry(entry_offset, epoch, raw[pos + _FRAME.size : pos + 8 + length])
                if out and entry.size > budget:
                    return out
                out.append(entry)
                budget -= entry.size
                pos += 8 + length
            if stop < len(segment.positions) or budget <= 0:
                return out
            offset = segment.end_offset
        return out

    # -- RaftLog ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        self._check_online()  # a follower's fetch offset acknowledges the entries below it
        return self._segments[-1].end_offset

    @property
    def last_epoch(self) -> int:
        return self._cache.last_epoch

    def append(self, entries: Sequence[Entry]) -> None:
        check_append(entries, self.log_end_offset, self.last_epoch)
        if not entries:
            return
        segment = self._segments[-1]
        if segment.size >= self._segment_bytes:
            try:
                segment = self._new_segment(self.log_end_offset)
            except OSError as exc:
                raise self._go_offline("creating a segment", exc) from exc
        chunks: list[bytes] = []
        positions: list[int] = []
        pos = segment.size
        for entry in entries:
            body = _BODY_HEADER.pack(entry.offset, entry.epoch) + entry.payload
            chunks.append(struct.pack(">iI", len(body), crc32c(body)))
            chunks.append(body)
            positions.append(pos)
            pos += 8 + len(body)
        data = memoryview(b"".join(chunks))
        written = segment.size
        try:
            if failpoint("raft.append.write") is SHORT:
                torn_pwrite(segment.fd, data, written)
            while data:
                n = os.pwrite(segment.fd, data, written)
                data = data[n:]
                written += n
        except OSError as exc:
            try:
                os.ftruncate(segment.fd, segment.size)  # nothing of the failed append stays
            except OSError as undo:
                self._invalidate_frame(segment, segment.size)
                raise self._go_offline("truncating a failed append back", undo) from exc
            raise
        segment.positions += positions
        for entry in entries:
            self._cache.assign(entry.epoch, entry.offset)
        segment.size = pos
        self._unsynced.add(segment.base_offset)

    def flush(self) -> None:
        self._check_online()
        for segment in self._segments:
            if segment.base_offset in self._unsynced:
                try:
                    fsync(segment.fd, segment.path, "raft.fsync")
                except OSError as exc:
                    offline = self._go_offline(f"fsync of {segment.path}", exc)
                    self._undo_unsynced()
                    raise offline from exc
        self._unsynced.clear()
        self._durable_end = self._segments[-1].end_offset

    def _undo_unsynced(self) -> None:
        """Cut every entry written since the last good flush, after a failed fsync: they were
        never acknowledged, so a restart must not replay them. Each segment is truncated back
        and synced (so a power loss cannot bring the entries back either); where either
        fails the first cut frame is invalidated for recovery to cut instead."""
        for segment in self._segments:
            if segment.base_offset not in self._unsynced:
                continue
            index = max(0, self._durable_end - segment.base_offset)
            if index >= len(segment.positions):
                continue
            cut = segment.positions[index]
            try:
                os.ftruncate(segment.fd, cut)
                os.fsync(segment.fd)
            except OSError as exc:
                log.error("cutting %s back to byte %d failed: %s", segment.path, cut, exc)
                self._invalidate_frame(segment, cut)
            del segment.positions[index:]
            segment.size = cut
        self._cache.truncate_from(self._durable_end)
        self._unsynced.clear()

    def _invalidate_frame(self, segment: _Segment, position: int) -> None:
        """Zero the frame header at ``position``, whose truncation failed: recovery cuts a
        frame whose length is below its header (a torn tail), and everything after it."""
        try:
            os.pwrite(segment.fd, bytes(_FRAME.size), position)
            os.fsync(segment.fd)
        except OSError as exc:
            log.error(
                "metadata log %s: could not undo the entries from byte %d (%s); a restart "
                "may replay entries that were refused",
                segment.path,
                position,
                exc,
            )

    def truncate_to(self, offset: int) -> None:
        self._check_online()
        if offset < self._start:
            raise RaftLogError(f"truncate to {offset} below log start {self._start}")
        if offset >= self.log_end_offset:
            return
        doomed = [s.base_offset for s in self._segments[1:] if s.base_offset >= offset]
        if doomed:
            self._delete_segment_files(doomed)
            self._segments = self._segments[: len(self._segments) - len(doomed)]
        segment, index = self._locate(offset)
        if index < len(segment.positions):
            cut = segment.positions[index]
            del segment.positions[index:]
            segment.size = cut
            try:
                os.ftruncate(segment.fd, cut)
                fsync(segment.fd, segment.path, "raft.fsync")
            except OSError as exc:
                raise self._go_offline(f"truncating {segment.path}", exc) from exc
        self._cache.truncate_from(offset)
        self._durable_end = min(self._durable_end, offset)

    def read(self, from_offset: int, max_bytes: int) -> list[Entry]:
        check_read(from_offset, self._start, self.log_end_offset)
        return self._read_range(from_offset, max_bytes)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        return self._cache.end_offset_for_epoch(epoch, self.log_end_offset)

    def create_snapshot(
        self, offset_exclusive: int, epoch: int, payloads: Sequence[bytes]
    ) -> SnapshotId:
        snapshot_id = self.begin_snapshot(offset_exclusive, epoch)
        self.write_snapshot_file(snapshot_id, payloads)
        self.adopt_snapshot(snapshot_id)
        return snapshot_id

    # A snapshot in three steps, so that the payloads can be encoded and written off the
    # owner's thread (:class:`pydmq.controller.local_log.LocalMetadataLog`): begin and adopt
    # on the owner's thread, the file in between on any thread.

    def begin_snapshot(self, offset_exclusive: int, epoch: int) -> SnapshotId:
        """The id of a snapshot of the entries below ``offset_exclusive``, once they are
        durable: recovery trusts a snapshot only together with a log that reaches it."""
        check_snapshot(offset_exclusive, epoch, self._start, self.log_end_offset, self._cache)
        self.flush()
        return SnapshotId(offset_exclusive, epoch)

    def write_snapshot_file(self, snapshot_id: SnapshotId, payloads: Sequence[bytes]) -> None:
        """Write the file of a :meth:`begin_snapshot` snapshot. Safe on any thread: it touches
        that file alone, and the log ignores it until :meth:`adopt_snapshot` (a restart before
        then starts from it, as from any snapshot the log reaches)."""
        path = os.path.join(self._dir, _snapshot_name(snapshot_id))
        write_atomically(path, encode_snapshot(snapshot_id, payloads))

    def adopt_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Start the log at a written snapshot: the previous snapshot and the segments below
        it are deleted, and the active segment is rolled so that the next snapshot can delete
        everything below it whole."""
        if snapshot_id.end_offset <= self._start:
            raise RaftLogError(f"snapshot {snapshot_id} is not past the log start {self._start}")
        self._replace_snapshot(snapshot_id)
        self._start = snapshot_id.end_offset
        self._cache.drop_prefix(snapshot_id)
        self._drop_segments_below(snapshot_id.end_offset)
        if self._segments[-1].positions:
            self._new_segment(self.log_end_offset)

    def _write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        write_atomically(os.path.join(self._dir, _snapshot_name(snapshot_id)), data)
        self._replace_snapshot(snapshot_id)

    def _replace_snapshot(self, snapshot_id: SnapshotId) -> None:
        old = self._snapshot
        self._snapshot = snapshot_id
        if old is not None and old != snapshot_id:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self._dir, _snapshot_name(old)))
            fsync_dir(self._dir)

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def _snapshot_path(self, snapshot_id: SnapshotId) -> str:
        if self._snapshot != snapshot_id:
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id}")
        return os.path.join(self._dir, _snapshot_name(snapshot_id))

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        with open(self._snapshot_path(snapshot_id), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if position < 0 or position > size:
                raise PositionOutOfRangeError(f"position {position} of {size} bytes")
            f.seek(position)
            return f.read(max(1, max_bytes)), size

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        decoded_id, _ = decode_snapshot(data)
        if decoded_id != snapshot_id:
            raise CorruptSnapshotError(f"snapshot bytes are of {decoded_id}, not {snapshot_id}")
        self._write_snapshot(snapshot_id, data)
        # A crash from here on leaves segments that recovery discards as disagreeing.
        self._delete_segment_files([s.base_offset for s in self._segments])
        self._segments = []
        self._start = snapshot_id.end_offset
        self._new_segment(snapshot_id.end_offset)
        self._cache.reset(snapshot_id)
        self._durable_end = snapshot_id.end_offset

    def load_snapshot(self, snapshot_id: SnapshotId) -> list[bytes]:
        with open(self._snapshot_path(snapshot_id), "rb") as f:
            return decode_snapshot(f.read())[1]

    def close(self) -> None:
        for segment in self._segments:
            segment.close()
        self._segments = []
