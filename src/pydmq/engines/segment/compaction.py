"""The segment engine's side of log compaction: reading closed segments on a cleaner thread,
writing cleaned segments, and the crash-safe swap of files (Kafka's protocol).

A cleaning that replaces the closed segments covering offsets ``[B, E)`` writes
``<B>.log.<E>.cleaned`` on the cleaner thread and fsyncs it; then, on the event loop
(:meth:`~pydmq.engines.segment.log.SegmentLog.replace_segments`):

1. renames it ``<B>.log.<E>.swap`` and fsyncs the directory (from here on the swap completes);
2. deletes the old segments' LMDB entries and syncs LMDB (a stale entry must never describe
   a file the swap replaces);
3. unlinks the old segment files (in-flight views of them keep their inodes, as for a
   retention delete);
4. renames the ``.swap`` file to ``<B>.log`` and fsyncs the directory;
5. scans the new segment into tracking and index entries.

At open, :func:`complete_swaps` (run by the loader before it lists segments) redoes steps 2-4
for every ``.swap`` file found, and a ``.cleaned`` file is a leftover (deleted with the other
leftovers): a crash at any point leaves either the old segments or the new one. The end offset
``E`` is in the names because the cleaned segment may end well before the last segment it
replaces (its last records cleaned away): only the name says which files the swap covers.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from pydmq.engines.segment.index import LogIndex, segment_prefix
from pydmq.failpoints import failpoint
from pydmq.protocol.batch_header import FRAME, LOG_OVERHEAD
from pydmq.protocol.records import CorruptRecordError, parse_batch_header, validate_crc
from pydmq.storage.api import StorageCorruptionError, TopicPartition
from pydmq.storage.checkpoint import fsync_dir
from pydmq.storage.errors import fdatasync

__all__ = [
    "CLEANED_SUFFIX",
    "CleanedSegmentFile",
    "SegmentFileBatches",
    "complete_swaps",
    "swap_name",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SWAP_FILE = re.compile(r"^(\d{20})\.log\.(\d{20})\.swap$")
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_READ_CHUNK = 1 << 20


def cleaned_name(base_offset: int, end_offset: int) -> str:
    return f"{base_offset:020d}.log.{end_offset:020d}{CLEANED_SUFFIX}"


def swap_name(base_offset: int, end_offset: int) -> str:
    return f"{base_offset:020d}.log.{end_offset:020d}{SWAP_SUFFIX}"


class SegmentFileBatches:
    """The batches of one closed segment file, read with ``pread`` on a cleaner thread.

    The descriptor is opened on the event loop when the cleaning is planned, so the inode read
    is the one the log had then (a retention delete or a truncation copy later unlinks or
    replaces the name, not this inode). Every batch is checked (framing, CRC32C) before it is
    handed out: damage raises StorageCorruptionError and is never copied into a cleaned
    segment with a fresh CRC. A file cut shorter meanwhile (a follower's truncation) ends the
    iteration early; the swap is then refused by the log's generation."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self._size = size
        self._fd = os.open(path, os.O_RDONLY)

    def batches(self) -> Iterator[memoryview]:
        position = 0
        buffer = memoryview(b"")
        buffer_at = 0  # file position of buffer[0]
        while position + LOG_OVERHEAD <= self._size:
            need = position + LOG_OVERHEAD - buffer_at
            if need > len(buffer):
                buffer, buffer_at = self._read(position, LOG_OVERHEAD), position
                if len(buffer) < LOG_OVERHEAD:
                    return  # the file was cut short
            _, length = FRAME.unpack_from(buffer, position - buffer_at)
            end = position + LOG_OVERHEAD + length
            if end > self._size or length < 0:
                raise self._damage(position, f"a batch of {length} bytes runs past the segment")
            if end - buffer_at > len(buffer):
                buffer, buffer_at = self._read(position, end - position), position
                if len(buffer) < end - position:
                    return
            view = buffer[position - buffer_at : end - buffer_at]
            try:
                validate_crc(view, parse_batch_header(view, 0))
            except CorruptRecordError as exc:
                raise self._damage(position, str(exc)) from exc
            yield view
            position = end

    def _read(self, position: int, at_least: int) -> memoryview:
        size = min(max(at_least, _READ_CHUNK), self._size - position)
        return memoryview(os.pread(self._fd, size, position))

    def _damage(self, position: int, reason: str) -> StorageCorruptionError:
        return StorageCorruptionError(
            f"{self.path}: {reason} at byte {position}: not cleaned", self.path, position
        )

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CleanedSegmentFile:
    """``<B>.log.<E>.cleaned``, written by one cleaner thread; swapped in on the event loop."""

    def __init__(self, log_dir: str, base_offset: int, end_offset: int) -> None:
        self.log_dir = log_dir
        self.base_offset = base_offset
        self.end_offset = end_offset
        self.path = os.path.join(log_dir, cleaned_name(base_offset, end_offset))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._size = 0
        self._pending: list[bytes | memoryview] = []
        self._pending_size = 0

    @property
    def size(self) -> int:
        return self._size + self._pending_size

    def append(self, batch: bytes | memoryview) -> None:
        self._pending.append(batch)
        self._pending_size += len(batch)
        if self._pending_size >= _READ_CHUNK:
            self._write()

    def _write(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            self._size += len(data)
            self._pending = []
            self._pending_size = 0

    def finish(self) -> None:
        self._write()
        fdatasync(self._fd, self.path, "cleaner.cleaned.fsync")
        os.close(self._fd)
        self._fd = -1

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def rename_to_swap(self) -> str:
        """Step 1: the finished file becomes ``.swap`` (durably): the swap will complete."""
        failpoint("cleaner.swap.before_rename")
        swap = os.path.join(self.log_dir, swap_name(self.base_offset, self.end_offset))
        os.rename(self.path, swap)
        fsync_dir(self.log_dir)
        self.path = swap
        failpoint("cleaner.swap.renamed")
        return swap


def complete_swaps(log_dir: str, tp: TopicPartition, index: LogIndex) -> int:
    """Complete every swap a crash interrupted (steps 2-4); returns how many."""
    names = os.listdir(log_dir)
    done = 0
    for name in sorted(names):
        m = _SWAP_FILE.match(name)
        if m is None:
            continue
        base, end = int(m.group(1)), int(m.group(2))
        replaced = sorted(
            int(s.group(1))
            for s in map(_SEGMENT_FILE.match, names)
            if s is not None and base <= int(s.group(1)) < end
        )
        finish_swap(log_dir, tp, index, os.path.join(log_dir, name), base, replaced)
        done += 1
    return done


def forget_segments(tp: TopicPartition, index: LogIndex, bases: list[int]) -> None:
    """Step 2: drop the LMDB entries of the segments a swap replaces, durably."""
    for base in bases:
        index.delete_segment(segment_prefix(tp, base))
    index.sync()
    failpoint("cleaner.swap.index_dropped")


def finish_swap(
    log_dir: str, tp: TopicPartition, index: LogIndex, swap: str, base: int, replaced: list[int]
) -> None:
    """Steps 2-4 at recovery (the live swap runs them through its segments)."""
    forget_segments(tp, index, replaced)
    for old in replaced:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(log_dir, f"{old:020d}.log"))
    rename_swap_into_place(log_dir, swap, base)


def rename_swap_into_place(log_dir: str, swap: str, base: int) -> None:
    """Step 4: the ``.swap`` file becomes the segment ``<B>.log``, durably."""
    os.rename(swap, os.path.join(log_dir, f"{base:020d}.log"))
    failpoint("cleaner.swap.after_rename")
    fsync_dir(log_dir)
