"""The ``memory`` storage engine: PartitionLog semantics in RAM, for tests and ephemeral topics.

Each batch is kept as its own bytes and counts as one "segment" for retention and compaction
(so the active segment is the last batch); ``maybe_roll`` has nothing to do. Aborted
transactions are a list in marker order; an entry goes with its marker's batch. A compaction swap
replaces a run of batches by the cleaned ones in one list assignment on the event loop; readers
hold the old ``bytes`` objects. Nothing survives the engine.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import islice

from pydmq.plugins.markers import hookimpl
from pydmq.protocol.records import BatchHeader, parse_batch_header
from pydmq.storage.api import (
    AbortedTxn,
    CleanedSegment,
    FetchDataInfo,
    LogConfig,
    OffsetOutOfRangeError,
    SegmentInfo,
    StorageEngineSpec,
    TimestampAndOffset,
    TopicPartition,
    overlapping_aborted_txns,
)

__all__ = ["MemoryLog", "MemoryStorageEngine", "pydmq_register_storage_engines"]


class MemoryBatches:
    """The bytes of one batch ("segment"), taken on the event loop; read on a cleaner thread."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def batches(self) -> Iterator[bytes]:
        yield self._data

    def close(self) -> None:
        return None


class MemoryCleanedSegment:
    """Cleaned batches collected by a cleaner thread until the swap takes them."""

    def __init__(self, owner: MemoryLog, base_offset: int) -> None:
        self.owner = owner
        self.base_offset = base_offset
        self.batches: list[bytes] = []
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def append(self, batch: bytes | memoryview) -> None:
        self.batches.append(bytes(batch))
        self._size += len(batch)

    def finish(self) -> None:
        return None

    def abort(self) -> None:
        self.batches = []
        self._size = 0


class MemoryLog:
    """One partition in RAM: parallel lists of base offsets, headers and batch bytes.

    Owned by the broker's event loop.
    """

    checkpoints_thread_safe = True  # write_checkpoint may run on the checkpoint writer thread

    def __init__(self, config: LogConfig, tp: TopicPartition | None = None) -> None:
        self.config = config
        self.tp = tp
        self._bases: list[int] = []
        self._headers: list[BatchHeader] = []
        self._data: list[bytes] = []
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._size = 0
        self._checkpoints: dict[str, bytes] = {}
        self._cleaning_generation = 0
        self._aborted: list[AbortedTxn] = []  # in marker order

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_in_bytes(self) -> int:
        return self._size

    def append(
        self, records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]
    ) -> None:
        if not headers:
            return
        if headers[0].base_offset < self._log_end_offset:
            raise ValueError(
                f"append at {headers[0].base_offset} below log end {self._log_end_offset}"
            )
        view = memoryview(records)
        for h in headers:
            data = bytes(view[h.position : h.position + h.size])
            self._bases.append(h.base_offset)
            self._headers.append(replace(h, position=0))
            self._data.append(data)
            self._size += len(data)
            self._log_end_offset = h.next_offset

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset >= ``offset`` (len if none)."""
        i = bisect_right(self._bases, offset) - 1
        if i < 0:
            return 0
        return i if self._headers[i].last_offset >= offset else i + 1

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FetchDataInfo:
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        buffers: list[bytes | memoryview] = []
        size = 0
        first = -1
        for i in range(self._index_of(offset), len(self._data)):
            h = self._headers[i]
            if h.next_offset > max_offset:
                break
            if size + h.size > max_bytes and not (min_one_batch and not buffers):
                break
            if first < 0:
                first = h.base_offset
            buffers.append(self._data[i])
            size += h.size
            if size >= max_bytes:
                break
        if not buffers:
            return FetchDataInfo.empty(offset)
        return FetchDataInfo(buffers, size, first)

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        i = self._index_of(from_offset)
        while i < len(self._headers):
            yield self._headers[i]
            i += 1

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        for h in self._headers:
            if h.max_timestamp >= timestamp and h.last_offset >= self._log_start_offset:
                offset = max(h.base_offset, self._log_start_offset)
                return TimestampAndOffset(h.max_timestamp, offset, h.partition_leader_epoch)
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        best: BatchHeader | None = None
        for h in self._headers:
            if h.last_offset < self._log_start_offset:
                continue
            if best is None or h.max_timestamp > best.max_timestamp:
                best = h
        if best is None:
            return None
        offset = max(best.base_offset, self._log_start_offset)
        return TimestampAndOffset(best.max_timestamp, offset, best.partition_leader_epoch)

    def truncate_to(self, offset: int) -> None:
        if offset >= self._log_end_offset:
            return
        self._cleaning_generation += 1
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        i = self._index_of(offset)
        for data in self._data[i:]:
            self._size -= len(data)
        if i < len(self._bases):
            self._log_end_offset = self._bases[i]
        del self._bases[i:], self._headers[i:], self._data[i:]
        end = self._log_end_offset
        self._aborted = [txn for txn in self._aborted if txn.last_offset < end]

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        self._aborted.append(txn)

    def remove_aborted_txns(self, last_offsets: Collection[int]) -> None:
        gone = set(last_offsets)
        self._aborted = [txn for txn in self._aborted if txn.last_offset not in gone]

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        return overlapping_aborted_txns(self._aborted, start_offset, upper_bound_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._cleaning_generation += 1
        self._bases.clear()
        self._headers.clear()
        self._data.clear()
        self._size = 0
        self._log_start_offset = self._log_end_offset = offset
        self._aborted.clear()

    def _delete_first(self, count: int) -> int:
        if count <= 0:
            return 0
        for data in self._data[:count]:
            self._size -= len(data)
        del self._bases[:count], self._headers[:count], self._data[:count]
        first = self._bases[0]
        self._log_start_offset = max(self._log_start_offset, first)
        if self._aborted and self._aborted[0].last_offset < first:
            self._aborted = [txn for txn in self._aborted if txn.last_offset >= first]
        return count

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        doomed = 0
        while doomed < len(self._bases) - 1 and self._bases[doomed + 1] <= offset:
            doomed += 1
        self._delete_first(doomed)
        return True

    def _closed(self) -> int:
        """How many batches retention may delete: all but the last (the active segment's)."""
        return max(len(self._data) - 1, 0)

    def delete_retention_ms_breached(self, now_ms: int) -> int:
        closed = (header.max_timestamp for header in islice(self._headers, self._closed()))
        return self._delete_first(self.config.retention_ms_breached(closed, now_ms))

    def delete_retention_size_breached(self) -> int:
        closed = (len(data) for data in islice(self._data, self._closed()))
        return self._delete_first(self.config.retention_size_breached(closed, self._size))

    def maybe_roll(self, now_ms: int) -> None:
        return None

    # -- compaction (the CompactableLog port): each batch is a segment --------------------

    @property
    def cleaning_generation(self) -> int:
        return self._cleaning_generation

    def closed_segments(self) -> list[SegmentInfo]:
        return [self._info(i) for i in range(len(self._headers) - 1)]

    def _info(self, i: int) -> SegmentInfo:
        h = self._headers[i]
        return SegmentInfo(h.base_offset, h.next_offset, h.size, h.max_timestamp, h.max_timestamp)

    def open_segment_batches(self, segment: SegmentInfo) -> MemoryBatches:
        i = bisect_right(self._bases, segment.base_offset) - 1
        if i < 0 or i >= len(self._headers) - 1 or self._info(i) != segment:
            raise ValueError(f"{segment} is not a closed segment of the log")
        return MemoryBatches(self._data[i])

    def new_cleaned_segment(self, base_offset: int, end_offset: int) -> MemoryCleanedSegment:
        return MemoryCleanedSegment(self, base_offset)

    def replace_segments(
        self, old: Sequence[SegmentInfo], cleaned: CleanedSegment, generation: int
    ) -> bool:
        if not isinstance(cleaned, MemoryCleanedSegment) or cleaned.owner is not self:
            raise TypeError(f"not a cleaned segment of this log: {cleaned!r}")
        first = bisect_right(self._bases, old[0].base_offset) - 1 if old else -1
        last = first + len(old)
        if (
            generation != self._cleaning_generation
            or first < 0
            or last >= len(self._headers)  # the active "segment" is never replaced
            or [self._info(i) for i in range(first, last)] != list(old)
        ):
            cleaned.abort()
            return False
        headers = [replace(parse_batch_header(b, 0), position=0) for b in cleaned.batches]
        self._size += cleaned.size - sum(len(d) for d in self._data[first:last])
        self._bases[first:last] = [h.base_offset for h in headers]
        self._headers[first:last] = headers
        self._data[first:last] = cleaned.batches
        return True

    def flush(self) -> None:
        return None

    def read_checkpoint(self, name: str) -> bytes | None:
        return self._checkpoints.get(name)

    def write_checkpoint(self, name: str, data: bytes) -> None:
        self._checkpoints[name] = bytes(data)

    def close(self) -> None:
        return None


class MemoryStorageEngine:
    """Keeps every :class:`MemoryLog` in a dict; ``data_dir`` is ignored."""

    def __init__(self, data_dir: str = "", options: Mapping[str, str] | None = None) -> None:
        self._logs: dict[TopicPartition, MemoryLog] = {}

    def open_log(self, tp: TopicPartition, config: LogConfig) -> MemoryLog:
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = MemoryLog(config, tp)
        else:
            log.config = config
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        self._logs.pop(tp, None)

    def list_logs(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def close(self) -> None:
        return None


@hookimpl
def pydmq_register_storage_engines() -> list[StorageEngineSpec]:
    return [StorageEngineSpec("memory", MemoryStorageEngine, "batches in RAM; nothing persists")]
