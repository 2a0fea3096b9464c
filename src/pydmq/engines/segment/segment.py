"""LogSegment: one segment file of whole batches plus its sparse index entries.

Owned by its :class:`~pydmq.engines.segment.log.SegmentLog` (the broker's event loop).

Reads of closed segments are memoryviews of an mmap of the file (zero copy). Small reads of the
active segment (under 256 KiB: the tail reads of consumers that keep up) use ``os.pread`` into a
bytes object by default: measured faster than re-mapping the growing file for them
(``python -m pydmq.engines.segment.bench``: about 25-30 us against 45-100 us for a 16 KB tail
read on the 2-core VM). Larger reads of the active segment (a consumer or follower catching up)
are views of an mmap too: copying them cost the broker 1.1-1.2 CPU-s per GB read against 0.3-0.4
for views. A truncation with a mapping alive copies the kept prefix to a new file (old views
keep the old inode), so no view ever loses its pages. ``read_mode="mmap"`` maps every read.

Files are opened on first use, not when a segment is built (start-up and topic creation open
none), through the engine's :class:`~pydmq.engines.segment.handles.FileHandleCache`, which
closes the least recently used ones beyond its budget. A segment remembers whether it was
written since its last ``fdatasync`` (``_dirty``) and syncs before its file is closed, so a
closed descriptor never drops a pending fsync. A new segment's file is created by its first
open (``O_CREAT`` only then: a file that vanished later is an error, not a new empty file).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from pydmq.engines.segment.handles import FileHandleCache
from pydmq.engines.segment.index import LogIndex, SegmentMeta, offset_key, segment_prefix, time_key
from pydmq.failpoints import failpoint
from pydmq.protocol.records import BATCH_HEADER_SIZE, BatchHeader, CorruptRecordError
from pydmq.storage.api import TimestampAndOffset, TopicPartition

__all__ = ["LogSegment", "segment_file_name"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_FRAME = struct.Struct(">qi")
_PREAD_MAX = 256 * 1024
_LAST_DELTA = struct.Struct(">i")
_LAST_DELTA_AT = 23
_LOG_OVERHEAD = 12
NO_TIMESTAMP = -1
_MAX_POSITION = 1 << 64


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def header_from(buf: bytes | memoryview | mmap.mmap, offset: int, position: int) -> BatchHeader:
    """Parse a header at ``offset`` of ``buf``; ``position`` is recorded as its file position."""
    if len(buf) - offset < BATCH_HEADER_SIZE:
        raise CorruptRecordError("truncated batch header")
    fields = _HEADER.unpack_from(buf, offset)
    if fields[3] != 2 or fields[1] < BATCH_HEADER_SIZE - _LOG_OVERHEAD:
        raise CorruptRecordError("bad batch framing")
    return BatchHeader(position, *fields)


class LogSegment:
    """One ``%020d.log`` file: append, positional reads, offset/time lookups, truncation."""

    __slots__ = (
        "_bytes_since_index",
        "_dirty",
        "_fd",
        "_handles",
        "_index",
        "_index_interval",
        "_last_time_entry_ts",
        "_may_create",
        "_mmap",
        "_mmap_size",
        "_pending_offsets",
        "_pending_times",
        "_read_mode",
        "active",
        "base_offset",
        "leader_epoch_of_max_timestamp",
        "max_timestamp",
        "meta_dirty",
        "next_offset",
        "offset_of_max_timestamp",
        "path",
        "prefix",
        "rolling_base_timestamp",
        "size",
    )

    def __init__(
        self,
        log_dir: str,
        tp: TopicPartition,
        base_offset: int,
        index: LogIndex,
        index_interval_bytes: int,
        handles: FileHandleCache,
        *,
        read_mode: str = "pread",
        meta: SegmentMeta | None = None,
        new_file: bool = False,
    ) -> None:
        """``meta`` describes the existing file (else it is looked at); ``new_file``: there is
        no file yet (a new log), it is created by the first open."""
        self.base_offset = base_offset
        self.path = os.path.join(log_dir, segment_file_name(base_offset))
        self.prefix = segment_prefix(tp, base_offset)
        self._index = index
        self._index_interval = index_interval_bytes
        self._read_mode = read_mode
        self._handles = handles
        self._fd = -1  # opened on first use (:meth:`_file`)
        self._dirty = False  # written (or truncated) since the last fdatasync
        self._may_create = new_file
        self._mmap: mmap.mmap | None = None
        self._mmap_size = 0
        self._pending_offsets: list[tuple[int, int]] = []
        self._pending_times: list[tuple[int, int, int]] = []
        self.active = False
        self.meta_dirty = True
        if meta is None:
            size = 0
            if not new_file:
                try:
                    size = os.stat(self.path).st_size
                except FileNotFoundError:
                    self._may_create = True  # a new segment: created by its first open
            meta = SegmentMeta(size, base_offset, NO_TIMESTAMP, -1, NO_TIMESTAMP, -1, 0)
        self.size = meta.size
        self.next_offset = meta.next_offset
        self.max_timestamp = meta.max_timestamp
        self.offset_of_max_timestamp = meta.offset_of_max_timestamp
        self.leader_epoch_of_max_timestamp = meta.leader_epoch_of_max_timestamp
        self.rolling_base_timestamp = meta.rolling_base_timestamp
        self._bytes_since_index = meta.bytes_since_last_index_entry
        self._last_time_entry_ts = NO_TIMESTAMP

    # -- state ---------------------------------------------------------------------------

    @property
    def meta(self) -> SegmentMeta:
        return SegmentMeta(
            self.size,
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.rolling_base_timestamp,
            self.leader_epoch_of_max_timestamp,
            self._bytes_since_index,
        )

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    @property
    def has_pending_index(self) -> bool:
        return bool(self._pending_offsets) or self.meta_dirty

    def take_pending(self) -> tuple[list[tuple[bytes, int]], list[tuple[bytes, int, int]]]:
        """Hand the in-memory index entries over for an LMDB write (and forget them)."""
        prefix = self.prefix
        offsets = [(offset_key(prefix, o), p) for o, p in self._pending_offsets]
        times = [(time_key(prefix, t), o, p) for t, o, p in self._pending_times]
        self._pending_offsets = []
        self._pending_times = []
        self.meta_dirty = False
        return offsets, times

    # -- the file -------------------------------------------------------------------------

    def _file(self) -> int:
        """The open descriptor, opening the file first if the handle cache closed it."""
        fd = self._fd
        if fd < 0:
            return self._open_file()
        self._handles.touch(self)
        return fd

    def _open_file(self) -> int:
        flags = os.O_RDWR | os.O_APPEND
        if self._may_create:
            flags |= os.O_CREAT
        fd = os.open(self.path, flags, 0o644)
        self._may_create = False
        self._fd = fd
        self._handles.opened(self)
        return fd

    def create_file(self) -> None:
        """Create (and open) the file now rather than at the first append."""
        self._file()

    # -- writes --------------------------------------------------------------------------

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        """Append whole batches with one write; index every ``index.interval.bytes``."""
        start = self.size
        view = memoryview(records)
        failpoint("segment.append.before_write")
        fd = self._file()
        self._dirty = True
        written = os.write(fd, view)
        while written < len(view):  # regular files rarely write short; be correct anyway
            view = view[written:]
            written = os.write(fd, view)
        failpoint("segment.append.after_write")
        self.size = start + len(records)
        self._track(headers, start)

    def _track(self, headers: Sequence[BatchHeader], shift: int) -> None:
        for h in headers:
            position = shift + h.position
            if self.rolling_base_timestamp == NO_TIMESTAMP and self.next_offset == self.base_offset:
                self.rolling_base_timestamp = h.max_timestamp
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp = h.max_timestamp
                self.offset_of_max_timestamp = h.base_offset
                self.leader_epoch_of_max_timestamp = h.partition_leader_epoch
            if self._bytes_since_index >= self._index_interval:
                self._pending_offsets.append((h.base_offset, position))
                if self.max_timestamp > self._last_time_entry_ts:
                    self._pending_times.append((self.max_timestamp, h.base_offset, position))
                    self._last_time_entry_ts = self.max_timestamp
                self._bytes_since_index = 0
            self._bytes_since_index += h.size
            self.next_offset = h.next_offset
        self.meta_dirty = True

    def fsync(self) -> None:
        if self._fd < 0 and not self._dirty:
            return  # never written, or synced when the cache closed it
        os.fdatasync(self._file())
        self._dirty = False

    # -- reads ---------------------------------------------------------------------------

    def _bytes(self, start: int, end: int) -> bytes | memoryview:
        """Bytes [start, end) of the file (end <= size)."""
        if end <= start:
            return b""
        if self.active and self._read_mode == "pread" and end - start < _PREAD_MAX:
            return os.pread(self._file(), end - start, start)
        mapped = self._mmap
        if mapped is None or end > self._mmap_size:
            mapped = self._map()
        else:
            self._handles.touch(self)
        return memoryview(mapped)[start:end]

    def _map(self) -> mmap.mmap:
        """Map the whole file as it is now (a new map replaces a shorter one)."""
        mapped = mmap.mmap(self._file(), self.size, access=mmap.ACCESS_READ)
        replaced = self._mmap is not None
        self._mmap = mapped  # a replaced map lives on while views of it are in flight
        self._mmap_size = self.size
        if not replaced:
            self._handles.opened(self)  # CPython's mmap holds a duplicate descriptor
        return mapped

    def header_at(self, position: int) -> BatchHeader:
        return header_from(
            self._bytes(position, min(self.size, position + BATCH_HEADER_SIZE)), 0, position
        )

    def _start_position(self, offset: int) -> int:
        pending = self._pending_offsets
        if pending and pending[0][0] <= offset:
            return pending[bisect_right(pending, (offset, _MAX_POSITION)) - 1][1]
        entry = self._index.floor_offset(self.prefix, offset)
        return 0 if entry is None else entry[1]

    def translate_offset(self, offset: int) -> BatchHeader | None:
        """Header of the batch containing ``offset`` (the first with last offset >= it)."""
        if offset >= self.next_offset:
            return None
        position = self._start_position(offset)
        while position < self.size:
            h = self.header_at(position)
            if h.last_offset >= offset:
                return h
            position += h.size
        return None

    def read(
        self, position: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> tuple[bytes | memoryview, int]:
        """Whole batches from ``position``: (buffer, next offset after the last one returned)."""
        end = self.size
        if max_offset >= self.next_offset and end - position <= max_bytes:
            return self._bytes(position, end), self.next_offset  # the common tail read
        buf = self._bytes(position, min(end, position + max(max_bytes, _LOG_OVERHEAD)))
        taken = 0
        next_offset = -1
        limit = len(buf)
        while taken + _LOG_OVERHEAD <= limit:
            base, length = _FRAME.unpack_from(buf, taken)
            size = length + _LOG_OVERHEAD
            if taken + size > limit or taken + _LAST_DELTA_AT + 4 > limit:
                break
            batch_next = base + _LAST_DELTA.unpack_from(buf, taken + _LAST_DELTA_AT)[0] + 1
            if batch_next > max_offset:
                break
            taken += size
            next_offset = batch_next
        if taken == 0:
            first = self.header_at(position)
            if not min_one_batch or first.next_offset > max_offset:
                return b"", -1
            return self._bytes(position, position + first.size), first.next_offset
        # A view, not a slice: slicing the bytes of a pread copied up to max_bytes again
        # (38 % of the broker's CPU while a Java consumer read 1 KiB records).
        return memoryview(buf)[:taken], next_offset

    def headers(self, position: int = 0) -> Iterator[BatchHeader]:
        while position < self.size:
            h = self.header_at(position)
            yield h
            position += h.size

    def find_offset_by_timestamp(
        self, timestamp: int, min_offset: int = 0
    ) -> TimestampAndOffset | None:
        """The first batch of this segment ending at or after ``min_offset`` whose max
        timestamp is >= ``timestamp``."""
        if self.max_timestamp < timestamp:
            return None
        position = 0
        times = self._pending_times
        i = bisect_right(times, (timestamp, -1, -1))  # entries are sorted: timestamps only grow
        if i:
            position = times[i - 1][2]
        else:
            found = self._index.floor_time_below(self.prefix, timestamp)
            if found is not None:
                position = found
        for h in self.headers(position):
            if h.max_timestamp >= timestamp and h.last_offset >= min_offset:
                return TimestampAndOffset(h.max_timestamp, h.base_offset, h.partition_leader_epoch)
        return None

    # -- recovery and truncation -------------------------------------------------------------

    def reset_tracking(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        self.leader_epoch_of_max_timestamp = -1
        self.rolling_base_timestamp = NO_TIMESTAMP
        self._bytes_since_index = 0
        self._last_time_entry_ts = NO_TIMESTAMP
        self._pending_offsets = []
        self._pending_times = []

    def recover(self, validate: bool = True) -> bool:
        """Rescan the whole file, rebuilding tracking and index entries; truncate a bad tail.

        Returns True if bytes were truncated (torn or corrupt tail).
        """
        from pydmq.protocol.records import validate_crc

        self.reset_tracking()
        self._drop_mmap()
        fd = self._file()
        file_size = os.fstat(fd).st_size
        valid = 0
        expected = self.base_offset
        if file_size:
            good: list[BatchHeader] = []
            with (
                mmap.mmap(fd, file_size, access=mmap.ACCESS_READ) as mm,
                memoryview(mm) as view,
            ):
                while valid < file_size:
                    try:
                        h = header_from(view, valid, valid)
                        if valid + h.size > file_size or h.base_offset < expected:
                            break
                        if validate:
                            validate_crc(view, h)
                    except CorruptRecordError:
                        break
                    good.append(h)
                    valid += h.size
                    expected = h.next_offset
            self._track(good, 0)
        truncated = valid < file_size
        if truncated:
            self._dirty = True
            os.ftruncate(fd, valid)
        self.size = valid
        self._index.delete_segment(self.prefix, keep_meta=True)
        self.meta_dirty = True
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove batches at or after the one containing ``offset``; returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        position = h.position
        removed = self.size - position
        if self._mmap is not None:
            self._copy_prefix(position)  # old mappings keep the old inode: no SIGBUS for readers
        else:
            self._dirty = True
            os.ftruncate(self._file(), position)
        self.size = position
        self._index.truncate_segment(self.prefix, h.base_offset)
        # Recompute tracking over the retained bytes (truncation is rare).
        retained = list(self.headers(0))
        self.reset_tracking()
        self._track(retained, 0)
        return removed

    def _copy_prefix(self, length: int) -> None:
        tmp = self.path + ".truncating"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        copied = 0
        source = self._file()
        while copied < length:
            chunk = os.pread(source, min(1 << 20, length - copied), copied)
            os.write(fd, chunk)
            copied += len(chunk)
        os.close(fd)
        os.replace(tmp, self.path)
        # The old inode is gone with its pending writes; the copy is the unsynced file now.
        self._release(sync=False)
        self._handles.closed(self)
        self._open_file()
        self._dirty = True

    # -- closing -------------------------------------------------------------------------------

    def _unmap(self) -> None:
        if self._mmap is not None:
            # Views still exported (an in-flight fetch) keep the map alive until released.
            with contextlib.suppress(BufferError):
                self._mmap.close()
            self._mmap = None
            self._mmap_size = 0

    def _drop_mmap(self) -> None:
        if self._mmap is not None:
            self._unmap()
            self._handles.closed(self, 1)

    def _release(self, *, sync: bool) -> None:
        """Close the file (fdatasync first if ``sync`` and written since) and drop the map;
        the handle cache's bookkeeping is the caller's."""
        fd = self._fd
        if fd >= 0:
            if sync and self._dirty:
                os.fdatasync(fd)
                self._dirty = False
            self._fd = -1
            os.close(fd)
        self._unmap()

    def close_handles(self) -> None:
        """The handle cache closes this idle segment's descriptors (it reopens on next use)."""
        self._release(sync=True)

    def close(self, *, sync: bool = True) -> None:
        """Close the file and drop the map; ``sync=False`` only for a log being deleted."""
        self._release(sync=sync)
        self._handles.closed(self)

    def delete(self) -> None:
        """Close and unlink; views handed out earlier stay valid (the inode lives on)."""
        self.close(sync=False)
        self._index.delete_segment(self.prefix)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
