"""The replicated log of ``__cluster_metadata``-0: its port, its values, and an in-memory log.

An entry is identified by ``(offset, epoch)``: the offset it sits at and the leader epoch that
appended it. Raft's log matching property makes the pair enough to compare two logs: if two
logs hold an entry with the same offset and epoch, they hold the same entries up to it. The
epoch cache (the first offset of every epoch in the log) answers "where does epoch N end in
my log", which is how a leader finds where a follower's log diverges.

A snapshot ``SnapshotId(end_offset, epoch)`` stands for every entry below ``end_offset``; its
``epoch`` is that of the entry at ``end_offset - 1``. After a snapshot the log may drop its
prefix, so ``log_start_offset`` moves up to the snapshot's ``end_offset``.

The snapshot bytes (what FetchSnapshot ships and :meth:`RaftLog.install_snapshot` takes) are
:func:`encode_snapshot`'s format: a header, the payloads framed with their length and CRC32C,
and a CRC32C of everything before it, so a follower can check a transfer before installing.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydmq.protocol.records import crc32c

__all__ = [
    "ENTRY_OVERHEAD",
    "CorruptSnapshotError",
    "Entry",
    "EpochCache",
    "MemoryRaftLog",
    "PositionOutOfRangeError",
    "RaftLog",
    "RaftLogError",
    "SnapshotId",
    "SnapshotNotFoundError",
    "decode_snapshot",
    "encode_snapshot",
    "snapshot_id_of",
]

# Bytes an entry costs besides its payload in a file frame: length, crc, offset, epoch.
ENTRY_OVERHEAD = 4 + 4 + 8 + 4

_SNAPSHOT_MAGIC = b"PDMQSNP1"
_SNAPSHOT_HEADER = struct.Struct(">8sqii")  # magic, end_offset, epoch, count
_SNAPSHOT_FRAME = struct.Struct(">iI")  # payload length, crc32c(payload)
_CRC = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of the metadata log: its offset, the epoch of the leader that wrote it."""

    offset: int
    epoch: int
    payload: bytes

    @property
    def size(self) -> int:
        """Bytes this entry counts for against a fetch's ``max_bytes``."""
        return ENTRY_OVERHEAD + len(self.payload)


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's SnapshotId: the snapshot holds every entry below ``end_offset``."""

    end_offset: int
    epoch: int


class RaftLogError(Exception):
    """A misuse of the log (non-contiguous append, truncation below the start...)."""


class CorruptSnapshotError(RaftLogError):
    """Snapshot bytes that fail their CRC or do not parse."""


class SnapshotNotFoundError(RaftLogError):
    """The asked snapshot is not (or no longer) the one this log holds (SNAPSHOT_NOT_FOUND)."""


class PositionOutOfRangeError(RaftLogError):
    """A FetchSnapshot position past the snapshot's end (POSITION_OUT_OF_RANGE)."""


class RaftLog(Protocol):
    """The Raft core's port to its log. Owned by the one task that drives the core.

    ``append`` need not be durable; ``flush`` makes everything appended so far (and any
    truncation before it) survive a crash. The core decides when to flush.
    """

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry; the snapshot's epoch if the log is empty; else 0."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries at ``log_end_offset``, contiguous, epochs never decreasing."""
        ...

    def flush(self) -> None: ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at or above ``offset`` (``log_start_offset <= offset``)."""
        ...

    def read(self, from_offset: int, max_bytes: int) -> list[Entry]:
        """Entries from ``from_offset``; at least one if any, then up to ``max_bytes``."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        """``(e, end)``: the largest epoch ``e <= epoch`` this log knows and where it ends.

        None when ``epoch`` is older than everything the log (and its snapshot) knows.
        """
        ...

    def create_snapshot(
        self, offset_exclusive: int, epoch: int, payloads: Sequence[bytes]
    ) -> SnapshotId:
        """Store a snapshot of the entries below ``offset_exclusive`` and drop that prefix."""
        ...

    def latest_snapshot(self) -> SnapshotId | None: ...

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        """A chunk of the snapshot's bytes and the snapshot's total size."""
        ...

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the whole log with a snapshot fetched from the leader."""
        ...

    def load_snapshot(self, snapshot_id: SnapshotId) -> list[bytes]:
        """The payloads the state machine stored in the snapshot."""
        ...

    def close(self) -> None: ...


def encode_snapshot(snapshot_id: SnapshotId, payloads: Sequence[bytes]) -> bytes:
    """The bytes of a snapshot: header, framed payloads, CRC32C of all that."""
    parts = [
        _SNAPSHOT_HEADER.pack(
            _SNAPSHOT_MAGIC, snapshot_id.end_offset, snapshot_id.epoch, len(payloads)
        )
    ]
    for payload in payloads:
        parts.append(_SNAPSHOT_FRAME.pack(len(payload), crc32c(payload)))
        parts.append(bytes(payload))
    body = b"".join(parts)
    return body + _CRC.pack(crc32c(body))


def snapshot_id_of(data: bytes | memoryview) -> SnapshotId:
    """The id in :func:`encode_snapshot` bytes whose header and CRC32C of the whole are
    intact (what recovery checks before trusting a snapshot file, without splitting its
    payloads); raises :class:`CorruptSnapshotError`."""
    return _check_snapshot(memoryview(data))[0]


def _check_snapshot(view: memoryview) -> tuple[SnapshotId, int]:
    """The snapshot's id and payload count, once its header and whole CRC32C are checked."""
    if len(view) < _SNAPSHOT_HEADER.size + _CRC.size:
        raise CorruptSnapshotError("snapshot shorter than its header")
    body = view[: len(view) - _CRC.size]
    (expected,) = _CRC.unpack_from(view, len(body))
    if crc32c(body) != expected:
        raise CorruptSnapshotError("snapshot CRC32C mismatch")
    magic, end_offset, epoch, count = _SNAPSHOT_HEADER.unpack_from(body, 0)
    if magic != _SNAPSHOT_MAGIC or count < 0 or end_offset < 0 or epoch < 0:
        raise CorruptSnapshotError("bad snapshot header")
    return SnapshotId(end_offset, epoch), count


def decode_snapshot(data: bytes | memoryview) -> tuple[SnapshotId, list[bytes]]:
    """Parse :func:`encode_snapshot` bytes; raises :class:`CorruptSnapshotError`."""
    view = memoryview(data)
    snapshot_id, count = _check_snapshot(view)
    body = view[: len(view) - _CRC.size]
    pos = _SNAPSHOT_HEADER.size
    payloads: list[bytes] = []
    for _ in range(count):
        if pos + _SNAPSHOT_FRAME.size > len(body):
            raise CorruptSnapshotError("snapshot frame header past the end")
        length, crc = _SNAPSHOT_FRAME.unpack_from(body, pos)
        pos += _SNAPSHOT_FRAME.size
        if length < 0 or pos + length > len(body):
            raise CorruptSnapshotError("snapshot payload past the end")
        payload = bytes(body[pos : pos + length])
        if crc32c(payload) != crc:
            raise CorruptSnapshotError("snapshot payload CRC32C mismatch")
        payloads.append(payload)
        pos += length
    if pos != len(body):
        raise CorruptSnapshotError("trailing bytes in snapshot")
    return snapshot_id, payloads


class EpochCache:
    """First offset of each epoch present in a log, plus the snapshot the log starts after.

    Kafka's leader-epoch checkpoint, kept in memory: both logs rebuild it from their entries.
    """

    __slots__ = ("_base", "_epochs", "_starts")

    def __init__(self, base: SnapshotId | None = None) -> None:
        self._base = base or SnapshotId(0, 0)
        self._epochs: list[int] = []
        self._starts: list[int] = []

    @property
    def last_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else self._base.epoch

    def assign(self, epoch: int, offset: int) -> None:
        """Note that the entry at ``offset`` has ``epoch`` (called for every append)."""
        if self._epochs and epoch == self._epochs[-1]:
            return
        if epoch < self.last_epoch:
            raise RaftLogError(f"epoch {epoch} at offset {offset} after epoch {self.last_epoch}")
        self._epochs.append(epoch)
        self._starts.append(offset)

    def truncate_from(self, offset: int) -> None:
        """Forget epochs whose first entry is at or above ``offset``."""
        while self._starts and self._starts[-1] >= offset:
            self._starts.pop()
            self._epochs.pop()

    def reset(self, base: SnapshotId) -> None:
        """The log now starts after snapshot ``base`` and holds no entries."""
        self._base = base
        self._epochs.clear()
        self._starts.clear()

    def drop_prefix(self, snapshot: SnapshotId) -> None:
        """The log now starts at ``snapshot.end_offset``; entries above it are kept."""
        self._base = snapshot
        i = bisect.bisect_right(self._starts, snapshot.end_offset) - 1
        if i < 0:
            return
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = snapshot.end_offset

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i >= 0:
            end = self._starts[i + 1] if i + 1 < len(self._starts) else log_end_offset
            return self._epochs[i], end
        if epoch >= self._base.epoch:
            # The log holds no epoch <= ``epoch`` but the snapshot's epoch is: its entries
            # end where the log begins.
            return self._base.epoch, self._base.end_offset
        return None

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at ``offset`` (which must be in the log)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else self._base.epoch


def check_append(entries: Sequence[Entry], log_end_offset: int, last_epoch: int) -> None:
    """Raise :class:`RaftLogError` unless ``entries`` extend the log contiguously."""
    expected = log_end_offset
    epoch = last_epoch
    for entry in entries:
        if entry.offset != expected:
            raise RaftLogError(f"append at offset {entry.offset}, log end is {expected}")
        if entry.epoch < epoch:
            raise RaftLogError(f"entry epoch {entry.epoch} below previous epoch {epoch}")
        expected += 1
        epoch = entry.epoch


def check_read(from_offset: int, log_start_offset: int, log_end_offset: int) -> None:
    """Raise :class:`RaftLogError` unless a read may start at ``from_offset`` (from the log
    start up to the log end, where it reads nothing)."""
    if from_offset < log_start_offset or from_offset > log_end_offset:
        raise RaftLogError(f"read at {from_offset} outside [{log_start_offset}, {log_end_offset}]")


def check_snapshot(
    offset_exclusive: int,
    epoch: int,
    log_start_offset: int,
    log_end_offset: int,
    epochs: EpochCache,
) -> None:
    """Raise :class:`RaftLogError` unless the entries below ``offset_exclusive`` may be
    snapshotted as ``epoch``: the log holds the last of them, and it is of that epoch."""
    if not log_start_offset < offset_exclusive <= log_end_offset:
        raise RaftLogError(
            f"snapshot at {offset_exclusive} outside ({log_start_offset}, {log_end_offset}]"
        )
    actual = epochs.epoch_at(offset_exclusive - 1)
    if actual != epoch:
        raise RaftLogError(f"snapshot epoch {epoch} but entry epoch is {actual}")


class MemoryRaftLog:
    """A :class:`RaftLog` in memory, whose flushed part survives :meth:`crash` like a disk.

    For tests and the simulation: ``crash`` forgets entries appended after the last ``flush``
    (maybe keeping some of them, as a disk may have written part of the unsynced tail).
    """

    def __init__(self) -> None:
        self._start = 0
        self._entries: list[Entry] = []
        self._cache = EpochCache()
        self._snapshot: tuple[SnapshotId, bytes] | None = None
        self._flushed_end = 0

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        return self._cache.last_epoch

    @property
    def flushed_offset(self) -> int:
        """Entries below this offset survive a crash."""
        return self._flushed_end

    def append(self, entries: Sequence[Entry]) -> None:
        check_append(entries, self.log_end_offset, self.last_epoch)
        for entry in entries:
            self._cache.assign(entry.epoch, entry.offset)
            self._entries.append(entry)

    def flush(self) -> None:
        self._flushed_end = self.log_end_offset

    def truncate_to(self, offset: int) -> None:
        if offset < self._start:
            raise RaftLogError(f"truncate to {offset} below log start {self._start}")
        if offset >= self.log_end_offset:
            return
        del self._entries[offset - self._start :]
        self._cache.truncate_from(offset)
        # Truncation is made durable at once (the file log fsyncs it too).
        self._flushed_end = min(self._flushed_end, offset)

    def read(self, from_offset: int, max_bytes: int) -> list[Entry]:
        check_read(from_offset, self._start, self.log_end_offset)
        out: list[Entry] = []
        size = 0
        for entry in self._entries[from_offset - self._start :]:
            size += entry.size
            if out and size > max_bytes:
                break
            out.append(entry)
        return out

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        return self._cache.end_offset_for_epoch(epoch, self.log_end_offset)

    def create_snapshot(
        self, offset_exclusive: int, epoch: int, payloads: Sequence[bytes]
    ) -> SnapshotId:
        check_snapshot(offset_exclusive, epoch, self._start, self.log_end_offset, self._cache)
        snapshot_id = SnapshotId(offset_exclusive, epoch)
        self._snapshot = (snapshot_id, encode_snapshot(snapshot_id, payloads))
        # A snapshot only covers flushed entries (the caller snapshots committed ones), so the
        # prefix it replaces is durable in any case.
        del self._entries[: offset_exclusive - self._start]
        self._start = offset_exclusive
        self._cache.drop_prefix(snapshot_id)
        self._flushed_end = max(self._flushed_end, offset_exclusive)
        return snapshot_id

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshot[0] if self._snapshot else None

    def _snapshot_bytes(self, snapshot_id: SnapshotId) -> bytes:
        if self._snapshot is None or self._snapshot[0] != snapshot_id:
            raise SnapshotNotFoundError(f"no snapshot {snapshot_id}")
        return self._snapshot[1]

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int]:
        data = self._snapshot_bytes(snapshot_id)
        if position < 0 or position > len(data):
            raise PositionOutOfRangeError(f"position {position} of {len(data)} bytes")
        return data[position : position + max(1, max_bytes)], len(data)

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        decoded_id, _ = decode_snapshot(data)
        if decoded_id != snapshot_id:
            raise CorruptSnapshotError(f"snapshot bytes are of {decoded_id}, not {snapshot_id}")
        self._snapshot = (snapshot_id, bytes(data))
        self._entries.clear()
        self._start = snapshot_id.end_offset
        self._cache.reset(snapshot_id)
        self._flushed_end = snapshot_id.end_offset

    def load_snapshot(self, snapshot_id: SnapshotId) -> list[bytes]:
        return decode_snapshot(self._snapshot_bytes(snapshot_id))[1]

    def close(self) -> None:
        pass

    def crash(self, keep_unflushed: int = 0) -> None:
        """Lose the entries after the last flush, except the first ``keep_unflushed``."""
        keep = min(self.log_end_offset, self._flushed_end + max(0, keep_unflushed))
        if keep < self.log_end_offset:
            del self._entries[keep - self._start :]
            self._cache.truncate_from(keep)
        self._flushed_end = self.log_end_offset
