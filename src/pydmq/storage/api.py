"""The storage port: what an engine must provide. Engines store offset-assigned batch bytes.

Engine-agnostic log logic (batch validation, offset assignment, producer state, the high
watermark, retention decisions) lives above this port in :mod:`pydmq.storage`; an engine only
keeps bytes, indexes them and hands them back. Every engine must pass
:mod:`pydmq.testing.conformance`.

Aborted transactions: an engine keeps the entries of Kafka's transaction index
(:class:`AbortedTxn`, one per ABORT marker, recorded by :meth:`PartitionLog.append_aborted_txn`
right after the marker's batch) with the segment that holds the marker, and answers
:meth:`PartitionLog.collect_aborted_txns` for read_committed fetches. An entry goes with its
marker: truncation removes the entries whose marker it removes, the log cleaner removes
those whose records it removed (``remove_aborted_txns``), deleting a segment
(retention, DeleteRecords, a full truncation) removes the entries recorded with it, and an
open drops entries whose marker is beyond the recovered log end. An entry must be durable
once ``append_aborted_txn`` returns (aborts are rare; the log above the port replays the
batches after its producer snapshot at open and records again any entry it finds missing).

Corrupt data: an engine never hands out stored bytes it found damaged and never answers a
read over them with anything but :class:`StorageCorruptionError` (the broker answers the
client CORRUPT_MESSAGE): not wrong bytes, not an empty result, not another exception. An
engine that cannot open a log without dropping data it had promised durable raises
:class:`StorageCorruptionError` from ``open_log`` instead of dropping it, unless the log is
``LogConfig.replicated`` (then the leader holds a copy: it may truncate the log before the
damage, and must say so in an ERROR log line).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydmq.protocol.records import BatchHeader

__all__ = [
    "AbortedTxn",
    "CleanedSegment",
    "CompactableLog",
    "FetchDataInfo",
    "LogConfig",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "SegmentBatches",
    "SegmentInfo",
    "StorageCorruptionError",
    "StorageEngine",
    "StorageEngineSpec",
    "TimestampAndOffset",
    "TopicPartition",
    "overlapping_aborted_txns",
]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A topic name and partition index."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-log settings an engine honours (Kafka topic-config names in Python casing)."""

    segment_bytes: int = 1024 * 1024 * 1024  # segment.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    segment_index_bytes: int = 10 * 1024 * 1024  # segment.index.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1 = unlimited)
    retention_bytes: int = -1  # retention.bytes (-1 = unlimited)
    flush_messages: int = 2**63 - 1  # flush.messages (1 = fsync every batch)
    flush_ms: int = 2**63 - 1  # flush.ms
    file_delete_delay_ms: int = 60000  # file.delete.delay.ms
    # cleanup.policy: retention.ms/retention.bytes delete segments only with "delete" in it
    # (Kafka's LogConfig.delete); "compact" makes the log cleaner compact the log.
    delete: bool = True
    compact: bool = False
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms (KIP-58)
    max_compaction_lag_ms: int = 2**63 - 1  # max.compaction.lag.ms (KIP-354)
    delete_retention_ms: int = 86400000  # delete.retention.ms (tombstones)
    # A follower replica of a partition with other replicas (cluster mode): the leader holds
    # the data, so damage found at open may be repaired by truncating the log before it (the
    # replica fetches the rest again). False: damage found at open below what was flushed
    # refuses the open (StorageCorruptionError); damage found later fails the reads over it.
    replicated: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)  # engine-specific settings

    @property
    def max_segment_ms(self) -> int:
        """How old the active segment may get before it rolls: ``segment.ms``, and on a
        compacted log at most ``max.compaction.lag.ms`` (KIP-354: the active segment is never
        cleaned, so it must roll for the lag to be kept; Kafka's LogConfig.maxSegmentMs)."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def retention_ms_breached(self, max_timestamps: Iterable[int], now_ms: int) -> int:
        """How many of the oldest closed segments retention.ms deletes, given their largest
        timestamps oldest first (never the active segment): those older than it, up to the
        first that is not; 0 with retention.ms -1 or without "delete" in cleanup.policy."""
        if self.retention_ms < 0 or not self.delete:
            return 0
        doomed = 0
        for max_timestamp in max_timestamps:
            if now_ms - max_timestamp <= self.retention_ms:
                break
            doomed += 1
        return doomed

    def retention_size_breached(self, sizes: Iterable[int], log_size: int) -> int:
        """How many of the oldest closed segments retention.bytes deletes, given their sizes
        oldest first (never the active segment) and the log's: the most whose deletion leaves
        at least retention.bytes; 0 with retention.bytes -1 or without "delete"."""
        if self.retention_bytes < 0 or log_size < self.retention_bytes or not self.delete:
            return 0
        excess = log_size - self.retention_bytes
        doomed = 0
        for size in sizes:
            if excess < size:
                break
            excess -= size
            doomed += 1
        return doomed


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Whole batches read from a log: ``buffers`` are written to the socket as they are.

    ``first_offset`` is the base offset of the first returned batch (it may be below the fetch
    offset when the fetch offset falls inside a batch). ``buffers`` may be memoryviews of mmap'd
    segment files; they stay valid until the segment is deleted.
    """

    buffers: Sequence[bytes | memoryview]
    size: int
    first_offset: int

    @staticmethod
    def empty(offset: int) -> FetchDataInfo:
        return FetchDataInfo((), 0, offset)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """Answer of a timestamp lookup: the first batch whose max timestamp reaches the target."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the aborted-transaction index (Kafka's AbortedTxn, the ``.txnindex``).

    The transaction of ``producer_id`` spans ``[first_offset, last_offset]``; ``last_offset``
    is the offset of its ABORT marker. ``last_stable_offset`` is the log's last stable offset
    once the marker was written, not counting the high watermark (the first offset of another
    open transaction, else the marker's offset + 1).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def overlapping_aborted_txns(
    entries: Iterable[AbortedTxn], start_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The entries overlapping ``[start_offset, upper_bound_offset)``, in the given order (the
    rule of :meth:`PartitionLog.collect_aborted_txns`, for engines that keep entries in RAM)."""
    return [
        txn
        for txn in entries
        if txn.last_offset >= start_offset and txn.first_offset < upper_bound_offset
    ]


@runtime_checkable
class PartitionLog(Protocol):
    """One partition's log as stored by an engine. Owned by the broker's event loop (one task).

    Offsets given to ``append`` are already assigned; batches are contiguous and increasing.
    """

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def size_in_bytes(self) -> int: ...

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        """Append one or more offset-assigned batches; ``headers`` are their parsed headers."""
        ...

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FetchDataInfo:
        """Whole batches from the one containing ``offset`` up to (not past) ``max_offset``.

        At most ``max_bytes`` unless ``min_one_batch`` and the first batch alone is larger.
        Raises :class:`OffsetOutOfRangeError` if ``offset`` is outside
        ``[log_start_offset, log_end_offset]``.
        """
        ...

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first batch whose max timestamp is >= ``timestamp`` (offset = its base offset,
        clamped to log start), or None. The caller refines to the exact record."""
        ...

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """The largest timestamp in the log and the offset of the batch that carries it."""
        ...

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches from the one containing ``from_offset`` to the end.

        ``BatchHeader.position`` is engine-specific and must not be interpreted by callers.
        Batches the engine finds damaged on the way may be stepped over (their reads still
        raise StorageCorruptionError): callers replay producer state and epochs from these."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after ``offset`` (offset must fall on a batch boundary),
        and the aborted transactions whose marker is at or after it."""
        ...

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose ABORT marker (at ``txn.last_offset``) is the
        last batch appended; durable when this returns. Kept with the marker's segment."""
        ...

    def remove_aborted_txns(self, last_offsets: Collection[int]) -> None:
        """Remove the entries whose marker offsets are ``last_offsets`` (the log cleaner,
        once their transactions' records are gone); durable when this returns."""
        ...

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``
        (``last_offset >= start_offset`` and ``first_offset < upper_bound_offset``), in
        marker order (Kafka's collectAbortedTxns over the segments of a fetch range)."""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log becomes empty with log start = log end = ``offset``."""
        ...

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords); delete segments wholly below it."""
        ...

    def delete_retention_ms_breached(self, now_ms: int) -> int:
        """Delete old closed segments by retention.ms; returns the number of segments deleted.
        Nothing is deleted unless ``LogConfig.delete`` (cleanup.policy has delete)."""
        ...

    def delete_retention_size_breached(self) -> int:
        """Delete the oldest closed segments while size exceeds retention.bytes (only with
        ``LogConfig.delete``)."""
        ...

    def maybe_roll(self, now_ms: int) -> None:
        """Roll the active segment if ``LogConfig.max_segment_ms`` has elapsed."""
        ...

    def flush(self) -> None:
        """Make everything appended durable (fsync)."""
        ...

    def read_checkpoint(self, name: str) -> bytes | None:
        """Read a small named blob (high watermark, producer snapshot, epoch cache)."""
        ...

    def write_checkpoint(self, name: str, data: bytes) -> None:
        """Atomically replace a small named blob (write temp, fsync, rename, fsync dir).

        A log class with ``checkpoints_thread_safe = True`` lets the broker call this from
        its checkpoint writer thread (never two calls for one log at once); without it,
        every call comes from the event loop."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class StorageEngine(Protocol):
    """Creates, opens and deletes partition logs under one data directory."""

    def open_log(self, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        """Open (recovering if needed) or create the log of ``tp``."""
        ...

    def delete_log(self, tp: TopicPartition) -> None: ...

    def list_logs(self) -> list[TopicPartition]: ...

    def close(self) -> None: ...


# -- log compaction -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A closed segment as the log cleaner sees it (engine-agnostic).

    ``next_offset`` is one past its last batch's last offset (``base_offset`` when empty);
    ``first_timestamp`` the max timestamp of its first batch and ``largest_timestamp`` the
    largest of its batches (-1 when empty): ``min.compaction.lag.ms`` (KIP-58) and
    ``max.compaction.lag.ms`` (KIP-354) are measured against them.
    """

    base_offset: int
    next_offset: int
    size: int
    first_timestamp: int
    largest_timestamp: int


class SegmentBatches(Protocol):
    """The whole batches of one closed segment, read by the log cleaner's thread.

    Made on the event loop by :meth:`CompactableLog.open_segment_batches`; afterwards only the
    cleaner thread uses it, and nothing the event loop does to the log (appends, retention,
    a truncation) makes it return torn bytes: it reads what the segment held when it was
    opened, or stops early (the swap is then refused, see ``replace_segments``)."""

    def batches(self) -> Iterator[bytes | memoryview]:
        """Each batch (12-byte log overhead included), in offset order."""
        ...

    def close(self) -> None: ...


class CleanedSegment(Protocol):
    """A cleaned segment being written by the log cleaner's thread; invisible to readers until
    :meth:`CompactableLog.replace_segments` swaps it in."""

    @property
    def size(self) -> int: ...

    def append(self, batch: bytes | memoryview) -> None:
        """Add one whole batch (offsets kept from the segments it replaces)."""
        ...

    def finish(self) -> None:
        """Make the written batches durable (the swap follows on the event loop)."""
        ...

    def abort(self) -> None:
        """Discard it (a cleaning aborted or refused); idempotent."""
        ...


@runtime_checkable
class CompactableLog(Protocol):
    """What an engine's log provides so the engine-agnostic cleaner can compact it.

    Every method but the objects' own is called on the event loop that owns the log; the
    reading and writing of segment bytes happen on a cleaner thread through
    :class:`SegmentBatches` and :class:`CleanedSegment`. The active segment is never listed.
    """

    @property
    def config(self) -> LogConfig:
        """The log's settings, compaction knobs included (updated on config changes)."""
        ...

    @property
    def cleaning_generation(self) -> int:
        """Changes whenever batches may have been removed or rewritten other than by a swap
        (truncation, full truncation): a swap prepared under another generation is refused."""
        ...

    def closed_segments(self) -> list[SegmentInfo]:
        """Every segment but the active one, in offset order."""
        ...

    def open_segment_batches(self, segment: SegmentInfo) -> SegmentBatches: ...

    def new_cleaned_segment(self, base_offset: int, end_offset: int) -> CleanedSegment:
        """A cleaned segment that will replace the closed segments covering offsets
        ``[base_offset, end_offset)``; it is named after ``base_offset``."""
        ...

    def replace_segments(
        self, old: Sequence[SegmentInfo], cleaned: CleanedSegment, generation: int
    ) -> bool:
        """Atomically replace the adjacent closed segments ``old`` by ``cleaned`` (finished).

        Refused (False, ``cleaned`` aborted) if ``generation`` is not the current one or
        ``old`` are no longer exactly the log's segments (a retention or a truncation came
        first). A crash at any point leaves either the old or the new segments. In-flight
        reads of the old segments stay valid."""
        ...


class EngineFactory(Protocol):
    def __call__(self, data_dir: str, options: Mapping[str, str]) -> StorageEngine: ...


@dataclass(frozen=True, slots=True)
class StorageEngineSpec:
    """What a plugin returns from ``pydmq_register_storage_engines``."""

    name: str
    factory: EngineFactory
    description: str = ""


class OffsetOutOfRangeError(Exception):
    """A read outside [log_start_offset, log_end_offset] (Kafka: OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class StorageCorruptionError(Exception):
    """Stored data failed validation (framing, CRC32C, offsets, files that disagree).

    Raised by reads over a damaged region (the broker answers CORRUPT_MESSAGE for the
    partition) and by ``open_log`` when the engine refuses to open a log rather than drop data
    it promised durable. ``path`` names the file (or the engine's own location of the data),
    ``position`` the byte position in it (-1 when unknown), ``offset`` the first offset
    affected (-1 when unknown).
    """

    def __init__(self, message: str, path: str, position: int = -1, offset: int = -1) -> None:
        super().__init__(message)
        self.path = path
        self.position = position
        self.offset = offset
