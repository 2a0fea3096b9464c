"""The LMDB offset and time indexes of every segment under one data directory.

One LMDB environment per data directory (``<data_dir>/.index.lmdb``) with three databases:

``offset``   key = prefix(tp, segment base) + offset (>q)          value = position (>Q)
``time``     key = prefix(tp, segment base) + biased timestamp (>Q) value = offset, position
``segment``  key = prefix(tp, segment base)                         value = :class:`SegmentMeta`

``prefix(tp, base)`` is ``topic \\0 partition(>i) base(>q)``: a topic name never holds a NUL,
so keys of one partition and of one segment are contiguous and floor lookups are range scans.
Entries are sparse (one per ``index.interval.bytes``) and can always be rebuilt from the
segment files. The environment is opened with ``sync=False``; :meth:`LogIndex.sync` makes it
durable on flush (a no-op when nothing was committed since the last sync). Owned by the
engine; used from the broker's event loop only.

Failures. A write transaction that fails (a full disk: LMDB reports a short write as EIO, so
the two cannot be told apart; a full map that cannot grow) is aborted and raised as
:class:`IndexWriteError`; the environment keeps its last committed state. Entries that could
not be *added* are kept by the caller and retried. Entries that could not be *deleted* (a
segment truncated or deleted) would claim positions that no longer exist, so the index is
then marked broken: lookups stop reading it (a segment is scanned from its start instead),
writes stop, and a marker file makes the next open discard and rebuild it. If even the marker
cannot be written, :meth:`LogIndex.mark_broken` raises and the caller takes the log dir
offline. A failed sync is a :class:`~pydmq.storage.errors.SyncFailedError`.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import lmdb

from pydmq.failpoints import failpoint
from pydmq.storage.api import TopicPartition
from pydmq.storage.errors import SyncFailedError

__all__ = ["IndexWriteError", "LogIndex", "SegmentMeta", "segment_prefix"]

log = logging.getLogger(__name__)

_BROKEN_MARKER = "rebuild-needed"

_PARTITION_BASE = struct.Struct(">iq")
_PARTITION = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_POSITION = struct.Struct(">Q")
_TIME_VALUE = struct.Struct(">qQ")
_META = struct.Struct(">QqqqqiQ")
_TS_BIAS: Final = 1 << 63
_DEFAULT_MAP_SIZE: Final = 1 << 30


def tp_prefix(tp: TopicPartition) -> bytes:
    return tp.topic.encode() + b"\x00" + _PARTITION.pack(tp.partition)


def segment_prefix(tp: TopicPartition, base_offset: int) -> bytes:
    return tp.topic.encode() + b"\x00" + _PARTITION_BASE.pack(tp.partition, base_offset)


def offset_key(prefix: bytes, offset: int) -> bytes:
    return prefix + _OFFSET.pack(offset)


def time_key(prefix: bytes, timestamp: int) -> bytes:
    return prefix + _POSITION.pack((timestamp + _TS_BIAS) & 0xFFFFFFFFFFFFFFFF)


@dataclass(frozen=True, slots=True)
class SegmentMeta:
    """What the loader needs to trust a segment without scanning it."""

    size: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    rolling_base_timestamp: int
    leader_epoch_of_max_timestamp: int
    bytes_since_last_index_entry: int

    def pack(self) -> bytes:
        return _META.pack(
            self.size,
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.rolling_base_timestamp,
            self.leader_epoch_of_max_timestamp,
            self.bytes_since_last_index_entry,
        )

    @staticmethod
    def unpack(data: bytes) -> SegmentMeta:
        return SegmentMeta(*_META.unpack(data))


class IndexWriteError(Exception):
    """An LMDB write transaction failed and was aborted (nothing of it was committed)."""


class LogIndex:
    """Sparse offset/time index entries and segment metadata, for all logs of a data dir."""

    def __init__(self, path: str, map_size: int = _DEFAULT_MAP_SIZE) -> None:
        self.path = path
        self.rebuilt = False  # True when the environment was missing or corrupt at open
        # Written since the last sync (or opened: a crash may have left writes unsynced).
        self._dirty = True
        self.broken = False  # deletions failed: not read nor written until rebuilt at open
        try:
            if os.path.exists(os.path.join(path, _BROKEN_MARKER)):
                raise lmdb.Error("marked for a rebuild")
            self._open(map_size, create=False)
        except lmdb.Error:
            # Missing or unreadable: start empty; the loaders rebuild from the segments.
            shutil.rmtree(path, ignore_errors=True)
            self.rebuilt = True
            self._open(map_size, create=True)

    def _open(self, map_size: int, *, create: bool) -> None:
        if not create and not os.path.exists(os.path.join(self.path, "data.mdb")):
            raise lmdb.Error("no index environment")
        self._env: Any = lmdb.open(
            self.path,
            map_size=map_size,
            max_dbs=8,
            sync=False,
            metasync=False,
            readahead=False,
            create=True,
        )
        try:
            self._offset_db = self._env.open_db(b"offset")
            self._time_db = self._env.open_db(b"time")
            self._segment_db = self._env.open_db(b"segment")
            with self._env.begin() as txn:  # probe: a corrupt file fails here
                for db in (self._offset_db, self._time_db, self._segment_db):
                    cursor = txn.cursor(db=db)
                    cursor.first()
                    cursor.last()
        except lmdb.Error:
            self._env.close()
            raise

    # -- writes -------------------------------------------------------------------------

    def _write(self, fn: Any) -> None:
        if self.broken:
            return
        self._dirty = True
        try:
            while True:
                try:
                    with self._env.begin(write=True) as txn:
                        fn(txn)
                        failpoint("index.commit")
                    return
                except lmdb.MapFullError:
                    self._env.set_mapsize(self._env.info()["map_size"] * 2)
        except (lmdb.Error, OSError) as exc:
            raise IndexWriteError(f"index write to {self.path} failed: {exc}") from exc

    def _delete(self, fn: Any) -> None:
        """A write that removes entries: if it fails, the index is marked broken."""
        try:
            self._write(fn)
        except IndexWriteError as exc:
            self.mark_broken(str(exc))

    def mark_broken(self, reason: str) -> None:
        """Stop reading and writing the index; the next open rebuilds it from the segments.

        Raises OSError when the marker that forces the rebuild cannot be written (the caller
        then takes the log dir offline: a restart could trust stale entries).
        """
        if self.broken:
            return
        self.broken = True
        log.error("index %s disabled until the next start (rebuilt then): %s", self.path, reason)
        fd = os.open(os.path.join(self.path, _BROKEN_MARKER), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def put(
        self,
        offset_entries: Iterable[tuple[bytes, int]],
        time_entries: Iterable[tuple[bytes, int, int]],
        metas: Iterable[tuple[bytes, SegmentMeta]],
    ) -> None:
        """Write index entries (key, position), (key, offset, position) and metas in one txn."""
        offsets = [(k, _POSITION.pack(p)) for k, p in offset_entries]
        times = [(k, _TIME_VALUE.pack(o, p)) for k, o, p in time_entries]
        packed = [(k, m.pack()) for k, m in metas]

        def fn(txn: Any) -> None:
            if offsets:
                txn.cursor(db=self._offset_db).putmulti(offsets)
            if times:
                txn.cursor(db=self._time_db).putmulti(times)
            for k, v in packed:
                txn.put(k, v, db=self._segment_db)

        failpoint("index.put.before_commit")
        self._write(fn)
        failpoint("index.put.after_commit")

    def delete_segment(self, prefix: bytes, *, keep_meta: bool = False) -> None:
        """Delete every index entry (and the meta unless ``keep_meta``) of one segment."""

        def fn(txn: Any) -> None:
            for db in (self._offset_db, self._time_db):
                _delete_from(txn.cursor(db=db), prefix, prefix)
            if not keep_meta:
                txn.delete(prefix, db=self._segment_db)

        self._delete(fn)

    def truncate_segment(self, prefix: bytes, next_offset: int) -> None:
        """Delete the entries of one segment for offsets >= ``next_offset``."""

        def fn(txn: Any) -> None:
            _delete_from(txn.cursor(db=self._offset_db), prefix, offset_key(prefix, next_offset))
            cursor = txn.cursor(db=self._time_db)
            # Time entries grow with offsets: delete the suffix whose offset is too large.
            if not cursor.set_range(prefix + b"\xff" * 8):
                if not cursor.last():
                    return
            elif not cursor.prev():
                return
            while cursor.key().startswith(prefix):
                offset, _ = _TIME_VALUE.unpack(cursor.value())
                if offset < next_offset:
                    break
                cursor.delete()
                if not cursor.prev():
                    break

        self._delete(fn)

    def delete_log(self, tp: TopicPartition) -> None:
        prefix = tp_prefix(tp)

        def fn(txn: Any) -> None:
            for db in (self._offset_db, self._time_db, self._segment_db):
                _delete_from(txn.cursor(db=db), prefix, prefix)

        self._delete(fn)

    # -- reads --------------------------------------------------------------------------

    def indexed_logs(self) -> set[bytes]:
        """The :func:`tp_prefix` of every partition with segment metadata (one scan)."""
        found: set[bytes] = set()
        with self._env.begin(db=self._segment_db) as txn:
            for key in txn.cursor().iternext(keys=True, values=False):
                found.add(bytes(key[: -_OFFSET.size]))
        return found

    def segment_metas(self, tp: TopicPartition) -> dict[int, SegmentMeta]:
        prefix = tp_prefix(tp)
        metas: dict[int, SegmentMeta] = {}
        with self._env.begin(db=self._segment_db) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not key.startswith(prefix):
                        break
                    metas[_OFFSET.unpack_from(key, len(prefix))[0]] = SegmentMeta.unpack(value)
        return metas

    def floor_offset(self, prefix: bytes, offset: int) -> tuple[int, int] | None:
        """The (offset, position) of the last entry at or below ``offset`` in one segment."""
        if self.broken:
            return None
        key = offset_key(prefix, offset)
        with self._env.begin(db=self._offset_db) as txn:
            cursor = txn.cursor()
            found = cursor.set_range(key)
            exact = found and cursor.key() == key
            if not exact and not (cursor.prev() if found else cursor.last()):
                return None
            k = cursor.key()
            if not k.startswith(prefix):
                return None
            return _OFFSET.unpack_from(k, len(prefix))[0], _POSITION.unpack(cursor.value())[0]

    def floor_time_below(self, prefix: bytes, timestamp: int) -> int | None:
        """The position of the last time entry with a timestamp strictly below ``timestamp``."""
        if self.broken:
            return None
        with self._env.begin(db=self._time_db) as txn:
            cursor = txn.cursor()
            found = cursor.set_range(time_key(prefix, timestamp))
            if not (cursor.prev() if found else cursor.last()):
                return None
            if not cursor.key().startswith(prefix):
                return None
            return int(_TIME_VALUE.unpack(cursor.value())[1])

    def last_offset_entry(self, prefix: bytes) -> tuple[int, int] | None:
        return self.floor_offset(prefix, 2**63 - 1)

    def offset_entries(self, prefix: bytes) -> list[tuple[int, int]]:
        """Every (offset, position) entry of one segment (for tests and tools)."""
        out: list[tuple[int, int]] = []
        with self._env.begin(db=self._offset_db) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for key, value in cursor:
                    if not key.startswith(prefix):
                        break
                    out.append(
                        (_OFFSET.unpack_from(key, len(prefix))[0], _POSITION.unpack(value)[0])
                    )
        return out

    def sync(self) -> None:
        """Make every committed write durable; a no-op when nothing was written since.

        Raises :class:`~pydmq.storage.errors.SyncFailedError` when the fsync fails."""
        if self._dirty and not self.broken:
            try:
                failpoint("index.sync")
                self._env.sync(True)
            except (lmdb.Error, OSError) as exc:
                code = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EIO
                raise SyncFailedError(code, f"index sync failed: {exc}", self.path) from exc
            self._dirty = False

    def close(self, *, sync: bool = True) -> None:
        """Close the environment, syncing it first unless ``sync`` is False (an offline dir:
        nothing may be promised durable any more)."""
        try:
            if sync:
                self.sync()
        finally:
            self._env.close()


def _delete_from(cursor: Any, prefix: bytes, start: bytes) -> None:
    if not cursor.set_range(start):
        return
    while cursor.key().startswith(prefix):
        if not cursor.delete():
            break
