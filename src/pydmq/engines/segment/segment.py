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

Validation on read: bytes the loader did not scan (segments it trusted at start-up, below the
recovery point) are checked (framing, CRC32C, offset order) the first time a read returns them;
:class:`~pydmq.engines.segment.verify.CheckedRanges` remembers what was checked, and bytes
appended or scanned by this process are never checked again. A damaged batch is logged at ERROR
once (file, byte position, offsets) and remembered with where intact batches resume: reads
return the intact batches before it, raise :class:`~pydmq.storage.api.StorageCorruptionError`
for the offsets it held, and serve the batches after it. An index entry that does not point at
the batch it names makes the segment's index be rebuilt from the file (WARNING).
Files are opened on first use, not when a segment is built (start-up and topic creation open
none), through the engine's :class:`~pydmq.engines.segment.handles.FileHandleCache`, which
closes the least recently used ones beyond its budget. A segment remembers whether it was
written since its last ``fdatasync`` (``_dirty``) and syncs before its file is closed, so a
closed descriptor never drops a pending fsync. A new segment's file is created by its first
open (``O_CREAT`` only then: a file that vanished later is an error, not a new empty file).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pydmq.engines.segment.handles import FileHandleCache
from pydmq.engines.segment.index import LogIndex, SegmentMeta, offset_key, segment_prefix, time_key
from pydmq.engines.segment.prescan import RecoveryPrescan
from pydmq.engines.segment.verify import (
    CheckedRanges,
    Damage,
    check_batches,
    find_resume,
    header_from,
)
from pydmq.failpoints import SHORT, failpoint, torn_write
from pydmq.protocol.batch_header import (
    BATCH_HEADER_SIZE,
    FRAME,
    LAST_OFFSET_DELTA,
    LAST_OFFSET_DELTA_AT,
    LOG_OVERHEAD,
)
from pydmq.protocol.records import BatchHeader, CorruptRecordError
from pydmq.storage.api import StorageCorruptionError, TimestampAndOffset, TopicPartition
from pydmq.storage.errors import SyncFailedError, fdatasync

__all__ = ["DamagedRange", "LogSegment", "TornWriteError", "segment_file_name"]

log = logging.getLogger(__name__)

_PREAD_MAX = 256 * 1024
NO_TIMESTAMP = -1
_MAX_POSITION = 1 << 64
# A recovery scan reads the whole file once: pre-fault its pages in one call rather than one
# fault per 4 KiB page (benchmarks/load_verify.py, 2 GiB warm: 785 -> 1,026 MiB/s).
_SCAN_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Bytes ``[position, resume_position)`` of a segment that failed validation; they held
    offsets ``[offset, resume_offset)``, which reads answer with StorageCorruptionError."""

    position: int
    resume_position: int
    offset: int
    resume_offset: int
    reason: str


class TornWriteError(OSError):
    """A failed append could not be undone: the segment file ends with torn bytes."""


class LogSegment:
    """One ``%020d.log`` file: append, positional reads, offset/time lookups, truncation."""

    __slots__ = (
        "_bytes_since_index",
        "_checked",
        "_damaged",
        "_dirty",
        "_entry_checked",
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
        "_sync_failed",
        "_unchecked_end",
        "_unchecked_entries_below",
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
        self._sync_failed: SyncFailedError | None = None  # sticky: see fsync
        self._may_create = new_file
        self._mmap: mmap.mmap | None = None
        self._mmap_size = 0
        self._pending_offsets: list[tuple[int, int]] = []
        self._pending_times: list[tuple[int, int, int]] = []
        self.active = False
        self.meta_dirty = True
        trusted_meta = meta is not None
        if meta is None:
            size = 0
            if not new_file:
                try:
                    size = os.stat(self.path).st_size
                except FileNotFoundError:
                    self._may_create = True  # a new segment: created by its first open
            meta = SegmentMeta(size, base_offset, NO_TIMESTAMP, -1, NO_TIMESTAMP, -1, 0)
        self.size = meta.size
        self._restore_tracking(meta)
        self._last_time_entry_ts = NO_TIMESTAMP
        # Bytes below ``_unchecked_end`` were trusted at load without a scan: each is checked
        # on its first read (``_checked``). A new segment, or one the loader scans, has none.
        self._unchecked_end = self.size if trusted_meta else 0
        # Index entries naming offsets below this were found in LMDB at load: each is checked
        # against the file before it is used (``_seek``).
        self._unchecked_entries_below = self.next_offset if trusted_meta else -1
        self._checked = CheckedRanges()
        self._damaged: list[DamagedRange] = []
        self._entry_checked = (-1, -1)  # the last load-time index entry found right

    # -- state ---------------------------------------------------------------------------

    def _restore_tracking(self, meta: SegmentMeta) -> None:
        """Offsets, timestamps and index spacing as ``meta`` gives them (its size aside)."""
        self.next_offset = meta.next_offset
        self.max_timestamp = meta.max_timestamp
        self.offset_of_max_timestamp = meta.offset_of_max_timestamp
        self.leader_epoch_of_max_timestamp = meta.leader_epoch_of_max_timestamp
        self.rolling_base_timestamp = meta.rolling_base_timestamp
        self._bytes_since_index = meta.bytes_since_last_index_entry

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
        offsets, times = self.pending_index()
        self.index_written(len(offsets), len(times))
        return offsets, times

    def pending_index(self) -> tuple[list[tuple[bytes, int]], list[tuple[bytes, int, int]]]:
        """The in-memory index entries as LMDB keys; they stay pending (see index_written)."""
        prefix = self.prefix
        offsets = [(offset_key(prefix, o), p) for o, p in self._pending_offsets]
        times = [(time_key(prefix, t), o, p) for t, o, p in self._pending_times]
        return offsets, times

    def index_written(self, offsets: int, times: int) -> None:
        """The first ``offsets``/``times`` pending entries and the metadata are in LMDB now."""
        del self._pending_offsets[:offsets]
        del self._pending_times[:times]
        self.meta_dirty = False

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
            failpoint("segment.create")
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
        """Append whole batches with one write; index every ``index.interval.bytes``.

        A write that fails (even after a part of it landed) is undone: the file is truncated
        back to its size before the append and the segment's state is untouched, so the next
        append never builds on torn bytes. The OSError is raised; :class:`TornWriteError`
        when the truncation failed too (the file then ends with bytes no batch accounts for).
        """
        start = self.size
        view = memoryview(records)
        failpoint("segment.append.before_write")
        fd = self._file()
        self._dirty = True
        try:
            if failpoint("segment.append.write") is SHORT:
                torn_write(fd, view)
            written = os.write(fd, view)
            while written < len(view):  # regular files rarely write short; be correct anyway
                view = view[written:]
                written = os.write(fd, view)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)
            except OSError as undo:
                raise TornWriteError(undo.errno, f"{exc}; truncating back: {undo}") from exc
            raise
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
        """fdatasync the file; a failure is raised as SyncFailedError, and again at every later
        call (the kernel may have dropped the pages: a failed sync is never retried into a
        success)."""
        if self._sync_failed is not None:
            raise self._sync_failed
        if self._fd < 0 and not self._dirty:
            return  # never written, or synced when the cache closed it
        self._sync(self._file())

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

    def header_at(self, position: int, offset: int = -1) -> BatchHeader:
        """The header of the batch at ``position``; damage there (bad framing, or a batch
        running past the end of the file) raises StorageCorruptionError. ``offset`` is the
        offset a batch there should start at (-1: unknown), for the report."""
        try:
            return self.peek_header(position)
        except CorruptRecordError as exc:
            raise self._damage(Damage(position, offset, str(exc))) from None

    def peek_header(self, position: int) -> BatchHeader:
        """The header at ``position``; CorruptRecordError (nothing recorded) if it is damaged."""
        h = header_from(
            self._bytes(position, min(self.size, position + BATCH_HEADER_SIZE)), 0, position
        )
        if position + h.size > self.size:
            raise CorruptRecordError(f"batch of {h.size} bytes runs past the end of the file")
        return h

    def _start_position(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the index entry at or below ``offset``; (-1, 0) without one."""
        pending = self._pending_offsets
        if pending and pending[0][0] <= offset:
            return pending[bisect_right(pending, (offset, _MAX_POSITION)) - 1]
        entry = self._index.floor_offset(self.prefix, offset)
        return (-1, 0) if entry is None else entry

    def _seek(self, offset: int) -> tuple[int, int]:
        """Where a walk towards ``offset`` starts: (position, the offset expected there).

        A known damaged range is stepped over, or raises if it held ``offset``. An index entry
        found in LMDB at load must point at the batch it names, or the segment's index is
        rebuilt from the file."""
        entry_offset, position = self._start_position(offset)
        expected = entry_offset if entry_offset >= 0 else self.base_offset
        for damaged in self._damaged:
            if damaged.offset <= offset < damaged.resume_offset:
                raise self._error(damaged)
            if offset >= damaged.resume_offset and position < damaged.resume_position:
                return damaged.resume_position, damaged.resume_offset
        if 0 <= entry_offset < self._unchecked_entries_below and not self._entry_matches(
            entry_offset, position
        ):
            self._rebuild_index()
            return self._seek(offset)
        return position, expected

    def _entry_matches(self, entry_offset: int, position: int) -> bool:
        if self._entry_checked == (entry_offset, position):
            return True
        if position >= self.size:
            return False
        try:
            if self.peek_header(position).base_offset != entry_offset:
                return False
        except CorruptRecordError:
            return False
        self._entry_checked = (entry_offset, position)
        return True

    def _rebuild_index(self) -> None:
        """An index entry disagrees with the file (or names a damaged batch): rebuild the
        segment's entries from the intact batches of the file. Its offsets, size and
        timestamps stay as they are."""
        log.warning(
            "%s: an offset index entry does not point at an intact batch it names: rebuilding "
            "the segment's index from the file",
            self.path,
        )
        kept = self.meta
        self._unchecked_entries_below = -1  # the entries written now are right
        headers = list(self.intact_headers())
        self.reset_tracking()
        self._track(headers, 0)
        offsets, times = self.take_pending()
        self._restore_tracking(kept)
        self._index.delete_segment(self.prefix, keep_meta=True)
        self._index.put(offsets, times, [(self.prefix, kept)])
        self._entry_checked = (-1, -1)

    def intact_headers(self, position: int = 0) -> Iterator[BatchHeader]:
        """The header of every batch from ``position`` (a batch start) to the end of the file,
        stepping over damaged ranges (each recorded and logged once as it is found); reads of
        those still raise. :meth:`headers` raises at damage instead."""
        expected = self.base_offset if position == 0 else -1
        while position < self.size:
            resume = [d for d in self._damaged if d.position == position]
            if resume:
                position, expected = resume[0].resume_position, resume[0].resume_offset
                continue
            try:
                h = self.header_at(position, expected)
            except StorageCorruptionError:
                continue  # header_at recorded it at ``position``: the next turn steps over it
            yield h
            position += h.size
            expected = h.next_offset

    def translate_offset(self, offset: int) -> BatchHeader | None:
        """Header of the batch containing ``offset`` (the first with last offset >= it)."""
        if offset >= self.next_offset:
            return None
        position, expected = self._seek(offset)
        while position < self.size:
            h = self.header_at(position, expected)
            if h.last_offset >= offset:
                return h
            position += h.size
            expected = h.next_offset
        return None

    def read(
        self, position: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> tuple[bytes | memoryview, int]:
        """Whole batches from ``position``: (buffer, next offset after the last one returned).

        Bytes not checked yet are checked first: the result stops before a damaged batch, and a
        damaged first batch raises StorageCorruptionError."""
        end = self.size
        if max_offset >= self.next_offset and end - position <= max_bytes:
            buf, next_offset = self._bytes(position, end), self.next_offset  # the common tail read
        else:
            buf, next_offset = self._read_batches(position, max_bytes, max_offset, min_one_batch)
        if position < self._unchecked_end and next_offset >= 0:
            return self._checked_read(position, buf, next_offset)
        return buf, next_offset

    def _read_batches(
        self, position: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> tuple[bytes | memoryview, int]:
        end = self.size
        buf = self._bytes(position, min(end, position + max(max_bytes, LOG_OVERHEAD)))
        taken = 0
        next_offset = -1
        limit = len(buf)
        while taken + LOG_OVERHEAD <= limit:
            base, length = FRAME.unpack_from(buf, taken)
            size = length + LOG_OVERHEAD
            if size < BATCH_HEADER_SIZE or taken + size > limit:
                break  # (a size below a header's is damage: header_at reports it)
            # size >= BATCH_HEADER_SIZE, so the whole header (lastOffsetDelta included) is in buf
            batch_next = (
                base + LAST_OFFSET_DELTA.unpack_from(buf, taken + LAST_OFFSET_DELTA_AT)[0] + 1
            )
            if batch_next > max_offset:
                break
            taken += size
            next_offset = batch_next
        if taken == 0:
            first = self.header_at(position, self.base_offset if position == 0 else -1)
            if not min_one_batch or first.next_offset > max_offset:
                return b"", -1
            return self._bytes(position, position + first.size), first.next_offset
        # A view, not a slice: slicing the bytes of a pread copied up to max_bytes again
        # (38 % of the broker's CPU while a Java consumer read 1 KiB records).
        return memoryview(buf)[:taken], next_offset

    def _checked_read(
        self, position: int, buf: bytes | memoryview, next_offset: int
    ) -> tuple[bytes | memoryview, int]:
        """``buf`` (whole batches read at ``position``) once its unchecked bytes are validated:
        cut before the first damaged batch, or StorageCorruptionError if that one is first."""
        stop = min(position + len(buf), self._unchecked_end)
        checked = self._checked
        start = checked.unchecked_from(position)
        if start >= stop:
            return buf, next_offset
        _, damage = check_batches(buf, start - position, stop - position, -1, shift=position)
        if damage is None:
            checked.add(position, stop)
            if checked.covers(0, self._unchecked_end):
                self._unchecked_end = 0  # every byte found at load is checked now
            return buf, next_offset
        checked.add(position, damage.position)
        intact: list[BatchHeader] = []
        at = 0
        while at < damage.position - position:
            intact.append(header_from(buf, at, at))
            at += intact[-1].size
        if damage.offset < 0:
            offset = intact[-1].next_offset if intact else self.base_offset
            damage = Damage(damage.position, offset, damage.reason)
        error = self._damage(damage)
        if not intact:
            raise error
        return memoryview(buf)[:at], intact[-1].next_offset

    def _damage(self, damage: Damage) -> StorageCorruptionError:
        """Remember damage found at ``damage.position`` (logged once, at ERROR, with where
        intact batches resume) and return the error reads over it raise."""
        for known in self._damaged:
            if known.position == damage.position:
                return self._error(known)
        offset = damage.offset if damage.offset >= 0 else self.base_offset
        resume = None
        if self.size > damage.position + 1:
            with mmap.mmap(self._file(), self.size, access=mmap.ACCESS_READ) as mm:
                resume = find_resume(mm, damage.position, self.size, offset, self.next_offset)
        damaged = DamagedRange(
            damage.position,
            self.size if resume is None else resume.position,
            offset,
            self.next_offset if resume is None else resume.base_offset,
            damage.reason,
        )
        self._damaged.append(damaged)
        self._damaged.sort(key=lambda d: d.position)
        log.error(
            "%s: corrupt data at byte %d (%s): offsets [%d, %d) cannot be read, fetches "
            "there answer CORRUPT_MESSAGE; intact batches resume at byte %d",
            self.path,
            damaged.position,
            damaged.reason,
            damaged.offset,
            damaged.resume_offset,
            damaged.resume_position,
        )
        return self._error(damaged)

    def _error(self, damaged: DamagedRange) -> StorageCorruptionError:
        return StorageCorruptionError(
            f"{self.path}: corrupt data at byte {damaged.position} ({damaged.reason}): "
            f"offsets [{damaged.offset}, {damaged.resume_offset}) cannot be read",
            self.path,
            damaged.position,
            damaged.offset,
        )

    def headers(self, position: int = 0) -> Iterator[BatchHeader]:
        expected = self.base_offset if position == 0 else -1
        while position < self.size:
            for damaged in self._damaged:
                if damaged.position == position:
                    raise self._error(damaged)
            h = self.header_at(position, expected)
            yield h
            position += h.size
            expected = h.next_offset

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

    def recover(self, prescan: RecoveryPrescan | None = None) -> Damage | None:
        """Rescan the whole file (framing, CRC32C, offset order), rebuilding tracking and index
        entries (in memory) over its intact prefix. Returns the first damage found (``size``
        then ends before it) or None. Neither the file nor the index is changed: the loader
        decides what a damaged tail means (:meth:`discard_damaged_tail`). ``prescan``: a scan
        of this very file made ahead on a thread is taken instead of scanning it again."""
        self.reset_tracking()
        self._drop_mmap()
        fd = self._file()
        file_size = os.fstat(fd).st_size
        damage = None
        valid = 0
        if file_size:
            ahead = None if prescan is None else prescan.take(self.path, fd)
            if ahead is not None:
                good, damage = ahead
            else:
                with (
                    mmap.mmap(fd, file_size, prot=mmap.PROT_READ, flags=_SCAN_FLAGS) as mm,
                    memoryview(mm) as view,
                ):
                    good, damage = check_batches(view, 0, file_size, self.base_offset)
            self._track(good, 0)
            valid = file_size if damage is None else damage.position
        self.size = valid
        self._forget_checks_from(0)
        self.meta_dirty = True
        return damage

    def discard_damaged_tail(self) -> int:
        """Cut the file where :meth:`recover` found damage; returns the bytes removed."""
        fd = self._file()
        removed = os.fstat(fd).st_size - self.size
        self._dirty = True
        os.ftruncate(fd, self.size)
        return removed

    def _forget_checks_from(self, position: int) -> None:
        """The file ends at ``position`` now: forget checks and damage at or past it."""
        self._checked.clip(position)
        self._unchecked_end = min(self._unchecked_end, position)
        self._damaged = [d for d in self._damaged if d.position < position]
        self._entry_checked = (-1, -1)

    def truncate_to(self, offset: int) -> int:
        """Remove batches at or after the one containing ``offset``; returns bytes removed."""
        h = self.translate_offset(offset)
        if h is None:
            return 0
        position = h.position
        removed = self.size - position
        # The index first: if the file cannot be cut, the index lacks entries (harmless, it is
        # sparse); the other way round it could claim positions that no longer exist.
        self._index.truncate_segment(self.prefix, h.base_offset)
        if self._mmap is not None:
            self._copy_prefix(position)  # old mappings keep the old inode: no SIGBUS for readers
        else:
            self._dirty = True
            os.ftruncate(self._file(), position)
        self.size = position
        self._forget_checks_from(position)
        # Recompute tracking over the retained bytes (truncation is rare).
        retained = list(self.headers(0))
        self.reset_tracking()
        self._track(retained, 0)
        return removed

    def _copy_prefix(self, length: int) -> None:
        tmp = self.path + ".truncating"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                copied = 0
                source = self._file()
                while copied < length:
                    chunk = memoryview(os.pread(source, min(1 << 20, length - copied), copied))
                    copied += len(chunk)
                    while chunk:
                        chunk = chunk[os.write(fd, chunk) :]
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk: the segment file stays as it was
            raise
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
                self._sync(fd)  # a failure keeps the file open, with its obligation
            self._fd = -1
            os.close(fd)
        self._unmap()

    def _sync(self, fd: int) -> None:
        try:
            fdatasync(fd, self.path, "segment.fsync")
        except SyncFailedError as exc:
            self._sync_failed = exc
            raise
        self._dirty = False

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
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._index.delete_segment(self.prefix)
