"""SegmentLog: one partition's log as segment files with LMDB indexes (a PartitionLog).

Owned by the broker's event loop (one task at a time); not thread-safe.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Collection, Iterator, Sequence

from pydmq.engines.segment.compaction import (
    CleanedSegmentFile,
    SegmentFileBatches,
    forget_segments,
    rename_swap_into_place,
)
from pydmq.engines.segment.handles import FileHandleCache
from pydmq.engines.segment.index import tp_prefix
from pydmq.engines.segment.loader import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LoadedLog,
    LogLoader,
)
from pydmq.engines.segment.prescan import RecoveryPrescan
from pydmq.engines.segment.segment import LogSegment, TornWriteError
from pydmq.engines.segment.segments import LogSegments
from pydmq.engines.segment.shared import IndexBatch, SharedDurability
from pydmq.engines.segment.txn_index import TransactionIndex
from pydmq.failpoints import failpoint
from pydmq.protocol.records import BatchHeader
from pydmq.storage.api import (
    AbortedTxn,
    CleanedSegment,
    FetchDataInfo,
    LogConfig,
    OffsetOutOfRangeError,
    SegmentInfo,
    StorageCorruptionError,
    TimestampAndOffset,
    TopicPartition,
)
from pydmq.storage.checkpoint import (
    read_checkpoint_file,
    write_atomically,
    write_offset_checkpoint,
)

__all__ = ["SegmentLog"]

_CHECKPOINT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


class SegmentLog:
    """A :class:`~pydmq.storage.api.PartitionLog` over ``<data_dir>/<topic>-<partition>/``.

    Appends are one ``os.write``; sparse index entries stay in memory and reach LMDB in one
    transaction at most every ``index_flush_ms`` (and on roll, flush and close). A crash loses
    only those entries, which recovery rebuilds from the segments.

    A ``log_dir`` that does not exist yet is a new, empty log: nothing is created on disk
    until its first write (append, checkpoint, truncation), so creating thousands of
    partitions costs no system call per partition and a topic whose creation is abandoned
    leaves nothing behind. Once created, the directory's entry in the data dir is made durable
    (``shared``, once for many logs) before the first thing this log promises durable: a flush
    or a checkpoint. Segment files are opened on first use through ``handles``. Aborted
    transactions are kept by a :class:`~pydmq.engines.segment.txn_index.TransactionIndex`.

    Write failures raise :class:`~pydmq.storage.errors.KafkaStorageError`. A failed append
    leaves the log as it was (the segment truncates its torn bytes back); a roll whose new
    segment file could not be created by the append keeps it, empty, as the active segment. A
    full disk is transient; anything else, and any failed fsync, takes the data dir offline
    (``shared``): no append, flush or checkpoint succeeds afterwards, and the recovery point
    never moves past what was synced. A failed index write only keeps the entries in memory.
    """

    checkpoints_thread_safe = True  # write_checkpoint may run on the checkpoint writer thread

    def __init__(
        self,
        tp: TopicPartition,
        log_dir: str,
        config: LogConfig,
        shared: SharedDurability,
        handles: FileHandleCache,
        *,
        read_mode: str = "pread",
        index_flush_ms: int = 500,
        prescan: RecoveryPrescan | None = None,
    ) -> None:
        """``prescan``: recovery scans run ahead after an unclean shutdown (see
        :mod:`~pydmq.engines.segment.prescan`)."""
        self.tp = tp
        self.dir = log_dir
        self.config = config
        self._shared = shared
        self._handles = handles
        self._dir_generation = shared.dir_generation  # 0 once the entry is known durable
        self._index = index = shared.index
        self._index_waiting = False  # registered with ``shared`` as having index entries waiting
        self._index_from = 0  # base offset of the oldest segment that may have entries waiting
        self._read_mode = read_mode
        self._index_flush_s = index_flush_ms / 1000.0
        self._dir_exists = _is_directory(log_dir)
        if self._dir_exists:
            loaded = LogLoader(log_dir, tp, config, index, read_mode, handles, prescan).load()
        else:
            loaded = self._new_log()
        self._segments = loaded.segments
        self._log_start_offset = loaded.log_start_offset
        self.recovery_point = loaded.recovery_point
        self.recovered_segments = loaded.recovered_segments
        self.truncated_bytes = loaded.truncated_bytes
        self._size = sum(s.size for s in self._segments)
        self._txn_index = TransactionIndex(log_dir)
        if self._dir_exists:
            try:
                self._txn_index.load(self._segments.first.base_offset, self.log_end_offset)
            except OSError as exc:
                raise shared.storage_error(f"loading the transaction index of {tp}", exc) from exc
        # Segments past the recovery point may hold bytes that were never fsynced (a kill -9
        # leaves them in the page cache, where recovery finds them): the next flush, which
        # moves the recovery point past them, must fsync them first.
        self._unflushed: list[LogSegment] = [
            s for s in self._segments if s.next_offset > self.recovery_point
        ]
        self._unflushed_messages = 0
        self._last_flush = time.monotonic()
        self._last_index_write = time.monotonic()
        self._closed = False
        self._cleaning_generation = 0  # bumped by truncations (see replace_segments)

    def _new_log(self) -> LoadedLog:
        """An empty log at offset 0 whose directory and first segment are created on first
        write. Index entries left by an earlier log of this name (a crash between its
        directory's removal and its index entries') would be taken for this one's: gone.
        Entries written since the engine started are removed with their log (delete_log)."""
        prefix = tp_prefix(self.tp)
        if prefix in self._shared.indexed_at_start:
            self._index.delete_log(self.tp)
            self._shared.indexed_at_start.discard(prefix)
        segments = LogSegments()
        segments.add(self._segment(0, new_file=True))
        segments.last.active = True
        return LoadedLog(segments, 0, 0, 0, 0)

    def _segment(self, base_offset: int, *, new_file: bool = False) -> LogSegment:
        return LogSegment(
            self.dir,
            self.tp,
            base_offset,
            self._index,
            self.config.index_interval_bytes,
            self._handles,
            read_mode=self._read_mode,
            new_file=new_file,
        )

    def _create_dir(self) -> None:
        """First write of a new log: create its directory (counted with ``shared``, whose
        entry is made durable before this log promises anything)."""
        try:
            os.mkdir(self.dir)
        except FileExistsError:
            if not os.path.isdir(self.dir):
                raise
        self._dir_generation = self._shared.directory_created()
        self._dir_exists = True

    # -- offsets and sizes --------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments.last.next_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    # -- append ------------------------------------------------------------------------

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        if not headers:
            return
        self._shared.check_online()
        if not self._dir_exists:
            try:
                self._create_dir()
            except OSError as exc:
                raise self._shared.storage_error(f"creating {self.dir}", exc) from exc
        active = self._segments.last
        if headers[0].base_offset < active.next_offset:
            raise ValueError(
                f"append at {headers[0].base_offset} below log end offset {active.next_offset}"
            )
        if active.size and active.size + len(records) > self.config.segment_bytes:
            active = self._roll(headers[0].base_offset)
        try:
            active.append(records, headers)
        except TornWriteError as exc:  # the undo failed: never build on the torn bytes
            raise self._shared.storage_error(f"append to {active.path}", exc) from exc
        except OSError as exc:
            raise self._shared.storage_error(f"append to {active.path}", exc) from exc
        self._size += len(records)
        self._index_pending()
        if not self._unflushed or self._unflushed[-1] is not active:
            self._unflushed.append(active)
        config = self.config
        if config.flush_messages < 2**62:
            self._unflushed_messages += sum(h.records_count for h in headers)
            if self._unflushed_messages >= config.flush_messages:
                self._flush_segments()
        now = time.monotonic()
        if now - self._last_index_write >= self._index_flush_s:
            self._write_index()
        if config.flush_ms < 2**62 and (now - self._last_flush) * 1000 >= config.flush_ms:
            self.flush()

    def _index_pending(self) -> None:
        if not self._index_waiting:
            self._index_waiting = True
            self._shared.index_pending(self)

    def _roll(self, base_offset: int) -> LogSegment:
        failpoint("segment.roll.before")
        old = self._segments.last
        old.active = False
        segment = self._segment(base_offset)  # its file is created by the append that follows
        segment.active = True
        self._segments.add(segment)
        self._write_index()
        failpoint("segment.roll.after")
        return segment

    def maybe_roll(self, now_ms: int) -> None:
        active = self._segments.last
        if (
            active.size
            and active.rolling_base_timestamp >= 0
            and now_ms - active.rolling_base_timestamp > self.config.max_segment_ms
        ):
            self._roll(active.next_offset)

    def collect_index(self, batch: IndexBatch) -> None:
        """Add the index entries waiting in memory to ``batch`` (for one LMDB put); they stay
        waiting until :meth:`index_written`."""
        for segment in self._segments.from_offset(self._index_from):
            if segment.has_pending_index:
                batch.add(segment)
        self._last_index_write = time.monotonic()  # a failed put is retried an interval later

    def index_written(self) -> None:
        """The entries collected last are in LMDB."""
        self._index_waiting = False
        self._index_from = self._segments.last.base_offset

    def _write_index(self) -> None:
        """Write this log's waiting index entries (kept waiting if the write fails)."""
        self._index_pending()
        self._shared.write_index([self])

    # -- read ----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FetchDataInfo:
        end = self._segments.last.next_offset
        if offset < self._log_start_offset or offset > end:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, end)
        if offset == end or offset >= max_offset:
            return FetchDataInfo.empty(offset)
        buffers: list[bytes | memoryview] = []
        size = 0
        first_offset = -1
        for segment in self._segments.from_offset(offset):
            try:
                if first_offset < 0:
                    header = segment.translate_offset(offset)
                    if header is None:
                        continue
                    position = header.position
                    first_offset = header.base_offset
                else:
                    if segment.is_empty:
                        continue
                    position = 0
                buf, next_offset = segment.read(
                    position, max_bytes - size, max_offset, min_one_batch and not buffers
                )
            except StorageCorruptionError:
                if buffers:
                    break  # serve the intact batches before the damage; the next read raises
                raise
            if next_offset < 0:
                break
            buffers.append(buf)
            size += len(buf)
            if next_offset < segment.next_offset or size >= max_bytes:
                break
        if not buffers:
            return FetchDataInfo.empty(offset)
        return FetchDataInfo(buffers, size, first_offset)

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the intact batches from the one containing ``from_offset``: a damaged
        range is stepped over (logged at ERROR once; reads of it raise), so that the producer
        state and epochs replayed at open cover everything readable."""
        started = False
        for segment in self._segments.from_offset(from_offset):
            if not started:
                header = segment.translate_offset(from_offset)
                if header is None:
                    continue
                started = True
                yield from segment.intact_headers(header.position)
            else:
                yield from segment.intact_headers(0)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        for segment in self._segments:
            if segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    return TimestampAndOffset(
                        found.timestamp,
                        max(found.offset, self._log_start_offset),
                        found.leader_epoch,
                    )
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        best: TimestampAndOffset | None = None
        start = self._log_start_offset
        for segment in self._segments:
            if segment.is_empty or (best is not None and segment.max_timestamp <= best.timestamp):
                continue
            if segment.base_offset < start and segment.offset_of_max_timestamp < start:
                # DeleteRecords left batches below log start in this segment: skip them.
                for h in segment.headers(0):
                    if h.last_offset >= start and (
                        best is None or h.max_timestamp > best.timestamp
                    ):
                        best = TimestampAndOffset(
                            h.max_timestamp, max(h.base_offset, start), h.partition_leader_epoch
                        )
                continue
            best = TimestampAndOffset(
                segment.max_timestamp,
                max(segment.offset_of_max_timestamp, start),
                segment.leader_epoch_of_max_timestamp,
            )
        return best

    # -- aborted transactions ------------------------------------------------------------------

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self._make_dir_entry_durable()
        self._shared.check_online()
        try:
            self._txn_index.append(txn)
        except OSError as exc:
            raise self._shared.storage_error(f"appending to {self._txn_index.path}", exc) from exc

    def remove_aborted_txns(self, last_offsets: Collection[int]) -> None:
        self._shared.check_online()
        try:
            self._txn_index.remove(last_offsets)
        except OSError as exc:
            raise self._shared.storage_error(f"rewriting {self._txn_index.path}", exc) from exc

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return self._txn_index.collect(start_offset, upper_bound_offset)

    # -- truncation, deletion, retention -------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        self._shared.check_online()
        self._cleaning_generation += 1
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        if offset < self.log_end_offset:
            try:
                self._truncate_tail(offset)
            except OSError as exc:
                raise self._shared.storage_error(f"truncating {self.tp}", exc) from exc
        # Also after a truncation whose checkpoint write failed (retried by the next call): a
        # recovery point above the log end would make a restart trust later unsynced appends.
        end = self.log_end_offset
        if self.recovery_point > end:
            self._write_offset(RECOVERY_POINT_CHECKPOINT, end)
            self.recovery_point = end

    def _truncate_tail(self, offset: int) -> None:
        for segment in reversed(list(self._segments)):
            if segment.base_offset > offset:
                self._delete_segment(segment)
        last = self._segments.last  # the floor of ``offset``: log start <= offset
        self._size -= last.truncate_to(offset)
        last.active = True
        if last.next_offset < offset:
            # ``offset`` follows a gap (compacted log): an empty segment keeps the log end there.
            last.active = False
            self._new_active(offset)
        self._write_index()
        self._unflushed = [s for s in self._unflushed if s in self._segments]
        self._txn_index.truncate_to(self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._cleaning_generation += 1
        for segment in list(self._segments):
            self._delete_segment(segment)
        self._unflushed = []
        self._new_active(offset)
        try:
            self._txn_index.clear()
        except OSError as exc:
            raise self._shared.storage_error(f"clearing {self._txn_index.path}", exc) from exc
        self._log_start_offset = offset
        self._write_log_start_offset()
        self.recovery_point = offset
        self._write_recovery_point()

    def _new_active(self, base_offset: int) -> None:
        if not self._dir_exists:
            self._create_dir()
        segment = self._segment(base_offset)
        # Created now: an empty segment after a gap is what keeps the log end there.
        segment.create_file()
        segment.active = True
        self._segments.add(segment)
        self._write_index()

    def _delete_segment(self, segment: LogSegment) -> None:
        self._segments.remove(segment.base_offset)
        self._size -= segment.size
        if segment in self._unflushed:
            self._unflushed.remove(segment)
        segment.delete()

    def _delete_prefix(self, count: int) -> int:
        deleted = 0
        for segment in list(self._segments)[:count]:
            self._delete_segment(segment)
            failpoint("retention.delete.segment")
            deleted += 1
        if deleted:
            first = self._segments.first.base_offset
            try:
                self._txn_index.delete_below(first)
            except OSError as exc:
                raise self._shared.storage_error(f"rewriting {self._txn_index.path}", exc) from exc
            if first > self._log_start_offset:
                self._log_start_offset = first
                self._write_log_start_offset()
        return deleted

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self.log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self._write_log_start_offset()
        closed = list(self._segments)[:-1]
        doomed = 0
        for segment in closed:
            following = self._segments.higher(segment.base_offset)
            if following is None or following.base_offset > offset:
                break
            doomed += 1
        self._delete_prefix(doomed)
        return True

    def delete_retention_ms_breached(self, now_ms: int) -> int:
        closed = (segment.max_timestamp for segment in list(self._segments)[:-1])
        return self._delete_prefix(self.config.retention_ms_breached(closed, now_ms))

    def delete_retention_size_breached(self) -> int:
        closed = (segment.size for segment in list(self._segments)[:-1])
        return self._delete_prefix(self.config.retention_size_breached(closed, self._size))

    # -- compaction (the CompactableLog port) -----------------------------------------------

    @property
    def cleaning_generation(self) -> int:
        return self._cleaning_generation

    def closed_segments(self) -> list[SegmentInfo]:
        return [_segment_info(s) for s in list(self._segments)[:-1]]

    def open_segment_batches(self, segment: SegmentInfo) -> SegmentFileBatches:
        current = self._segments.floor(segment.base_offset)
        if current is None or _segment_info(current) != segment or current.active:
            raise ValueError(f"{self.tp}: {segment} is not a closed segment of the log")
        return SegmentFileBatches(current.path, current.size)

    def new_cleaned_segment(self, base_offset: int, end_offset: int) -> CleanedSegmentFile:
        return CleanedSegmentFile(self.dir, base_offset, end_offset)

    def replace_segments(
        self, old: Sequence[SegmentInfo], cleaned: CleanedSegment, generation: int
    ) -> bool:
        """The swap of :mod:`~pydmq.engines.segment.compaction` (its steps 1-5).

        The log is flushed first when its recovery point lies inside the replaced range: a
        cleaned segment that ends early leaves a gap, which the loader must find below the
        recovery point (a gap past it reads as a power loss's hole). The old segments are
        deleted as retention deletes them: views of them handed out stay valid."""
        if not isinstance(cleaned, CleanedSegmentFile) or cleaned.log_dir != self.dir:
            raise TypeError(f"{self.tp}: not a cleaned segment of this log: {cleaned!r}")
        replaced = self._replaceable(old, generation)
        if replaced is None or not old or cleaned.base_offset != old[0].base_offset:
            cleaned.abort()
            return False
        self._shared.check_online()
        try:
            if self.recovery_point < cleaned.end_offset:
                self.flush()
            swap = cleaned.rename_to_swap()
        except BaseException:
            cleaned.abort()
            raise
        try:
            forget_segments(self.tp, self._index, [s.base_offset for s in replaced])
            for segment in replaced:
                self._delete_segment(segment)
                failpoint("cleaner.swap.delete.segment")
            rename_swap_into_place(self.dir, swap, cleaned.base_offset)
            segment = self._segment(cleaned.base_offset)
            damage = segment.recover()
        except OSError as exc:  # the .swap file stays: the next open completes the swap
            what = f"swapping a cleaned segment into {self.tp}"
            raise self._shared.storage_error(what, exc) from exc
        if damage is not None:
            raise self._shared.storage_error(
                f"scanning the cleaned segment {segment.path}", OSError(damage.reason)
            )
        self._segments.add(segment)
        self._size += segment.size
        self._index_from = min(self._index_from, segment.base_offset)
        self._write_index()
        failpoint("cleaner.swap.done")
        return True

    def _replaceable(self, old: Sequence[SegmentInfo], generation: int) -> list[LogSegment] | None:
        """The segments ``old`` describes, if they still are exactly the log's closed segments
        over their range and no truncation happened since ``generation``."""
        if generation != self._cleaning_generation or not old or self._closed:
            return None
        found = [
            s
            for s in self._segments.from_offset(old[0].base_offset)
            if s.base_offset < old[-1].next_offset or s.base_offset <= old[-1].base_offset
        ]
        if [_segment_info(s) for s in found] != list(old) or any(s.active for s in found):
            return None
        return found

    # -- durability and checkpoints ------------------------------------------------------------

    def _flush_segments(self) -> None:
        self._shared.check_online()
        for segment in self._unflushed:
            try:
                segment.fsync()
            except OSError as exc:  # never retried: a later fsync may succeed over lost pages
                raise self._shared.storage_error(f"fsync of {segment.path}", exc) from exc
        self._unflushed = []
        self._unflushed_messages = 0
        self._last_flush = time.monotonic()

    def _make_dir_entry_durable(self) -> None:
        """Before the first promise: the log directory's entry in the data dir is durable."""
        if not self._dir_exists:
            self._create_dir()
        if self._dir_generation:
            self._shared.make_entries_durable(self._dir_generation)
            self._dir_generation = 0

    def _write_recovery_point(self) -> None:
        self._write_offset(RECOVERY_POINT_CHECKPOINT, self.recovery_point)

    def _write_log_start_offset(self) -> None:
        self._write_offset(LOG_START_OFFSET_CHECKPOINT, self._log_start_offset)

    def _write_offset(self, name: str, offset: int) -> None:
        self._make_dir_entry_durable()
        self._shared.check_online()
        try:
            write_offset_checkpoint(os.path.join(self.dir, name), offset)
        except OSError as exc:
            raise self._shared.storage_error(f"writing {name} of {self.tp}", exc) from exc

    def flush(self) -> None:
        if not self._dir_exists:
            return  # nothing was ever written: nothing to make durable
        self._make_dir_entry_durable()
        self._flush_segments()
        # Every log's waiting index entries in one transaction; the environment is synced only
        # if something was written since its last sync (closing many logs syncs it once).
        self._shared.sync_index()
        end = self.log_end_offset
        if self.recovery_point != end:
            self._write_offset(RECOVERY_POINT_CHECKPOINT, end)
            self.recovery_point = end

    def _checkpoint_path(self, name: str) -> str:
        if not _CHECKPOINT_NAME.match(name):
            raise ValueError(f"invalid checkpoint name {name!r}")
        return os.path.join(self.dir, name + ".checkpoint")

    def read_checkpoint(self, name: str) -> bytes | None:
        if not self._dir_exists:
            return None  # a new log: opening thousands of them reads no file
        return read_checkpoint_file(self._checkpoint_path(name))

    def write_checkpoint(self, name: str, data: bytes) -> None:
        path = self._checkpoint_path(name)
        self._make_dir_entry_durable()
        self._shared.check_online()
        try:
            write_atomically(path, data)
        except OSError as exc:
            raise self._shared.storage_error(f"writing {path}", exc) from exc

    def close(self) -> None:
        """Flush and close; with the data dir offline, close without promising anything."""
        if self._closed:
            return
        try:
            if self._shared.offline is None:
                self.flush()
        finally:
            self._shared.forget(self)
            online = self._shared.offline is None
            for segment in self._segments:
                try:
                    segment.close(sync=online)
                except OSError as exc:  # a sync failed: nothing more is promised
                    self._shared.storage_error(f"closing {segment.path}", exc)
                    online = False
                    segment.close(sync=False)
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def has_directory(self) -> bool:
        """False for a new log nothing was written to yet: nothing of it is on disk."""
        return self._dir_exists


def _segment_info(segment: LogSegment) -> SegmentInfo:
    return SegmentInfo(
        segment.base_offset,
        segment.next_offset,
        segment.size,
        segment.rolling_base_timestamp,
        segment.max_timestamp,
    )


def _is_directory(path: str) -> bool:
    """Whether ``path`` is a directory; False if nothing is there (a file there is an error)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        raise FileExistsError(f"{path} exists and is not a directory")
    return True
