"""The share-partitions this node leads, and how ShareFetch and ShareAcknowledge use them
(Kafka's SharePartitionManager).

One :class:`~pydmq.shares.partition.SharePartition` per (group, topic id, partition) this node
leads, loaded at the first ShareFetch of the group there (:meth:`SharePartitionManager.prepare`,
awaited by the handler before it reads): read from its share coordinator at this leader's
epoch (:class:`~pydmq.shares.persister.SharePersister`, which fences the previous leader),
else started where the group's ``share.auto.offset.reset`` says (a GROUP config: ``latest``,
the default, the high watermark; ``earliest`` the log start offset;
``by_duration:<ISO-8601>`` the first batch whose records reach now minus the duration, else
the high watermark) and persisted at once. A share-partition whose partition this node led at
another leader epoch, or whose write the coordinator fenced, is dropped and loaded again. New acquisitions lock records for the group's
``share.record.lock.duration.ms`` when it sets one, else the broker's. A fetch applies the lock expiries, reads whole batches from the lowest
offset it may hand out, and acquires the offsets those batches cover (never more than it
returns). Every change of the records' states (acknowledgements, releases, expiries) is
persisted as a new snapshot (:class:`~pydmq.shares.state_writer.StateWriter`) and the handlers
await it (:meth:`SharePartitionManager.persisted`) before answering. Owned by the broker's event
loop; the clock is injected.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydmq.config.group_configs import (
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
    SHARE_RECORD_LOCK_DURATION,
    auto_offset_reset_duration_ms,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import iter_batch_headers
from pydmq.replication.partition import Partition
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.shares.generated_records import ShareSnapshotValue
from pydmq.shares.partition import (
    AcquiredRecords,
    RecordState,
    SharePartition,
    SharePartitionLimits,
)
from pydmq.shares.persister import SharePersister
from pydmq.shares.state_log import restore, snapshot_of
from pydmq.shares.state_writer import StateWriter
from pydmq.storage.api import AbortedTxn, FetchDataInfo, TopicPartition

__all__ = ["ShareFetchResult", "SharePartitionManager"]

log = logging.getLogger(__name__)

# (group id, topic id, partition index)
_Key = tuple[str, uuid.UUID, int]
_RELEASE = 2  # the acknowledgement type that makes records available again


@dataclass(frozen=True, slots=True)
class ShareFetchResult:
    """One partition's answer to a ShareFetch: the batches read and the offsets acquired."""

    error_code: int
    records: FetchDataInfo | None = None
    acquired: Sequence[AcquiredRecords] = ()


class SharePartitionManager:
    """Every share-partition of this node (see the module)."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        limits: SharePartitionLimits,
        clock_ms: Callable[[], int],
        persister: SharePersister | None = None,
        group_config: Callable[[str], Mapping[str, str]] = lambda _group_id: {},
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.replica_manager = replica_manager
        self.limits = limits
        self.clock_ms = clock_ms
        self.persister = persister
        # The configs a group id sets (GROUP resource), and the clock by_duration counts back on.
        self.group_config = group_config
        self.wall_clock_ms = wall_clock_ms
        self.share_partitions: dict[_Key, SharePartition] = {}
        self._leader_epochs: dict[_Key, int] = {}
        self._state_epochs: dict[_Key, int] = {}
        # Topic names by id, as met by fetches (to wake the parked ShareFetches of a topic).
        self._topic_names: dict[uuid.UUID, str] = {}
        self._loads: dict[_Key, asyncio.Task[None]] = {}
        self._load_errors: dict[_Key, int] = {}
        self._writer = StateWriter(self._write_state, self._fenced)

    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        return self.share_partitions.get((group_id, topic_id, partition))

    def of_group(self, group_id: str) -> dict[tuple[uuid.UUID, int], SharePartition]:
        """The share-partitions of ``group_id`` by (topic id, partition)."""
        return {(t, p): sp for (g, t, p), sp in self.share_partitions.items() if g == group_id}

    def fetch(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        tp: TopicPartition,
        max_bytes: int,
        max_records: int,
        whole_batches: bool = False,
        shared: bool = True,
    ) -> ShareFetchResult:
        """Acquire records of ``tp`` for ``member_id`` and read the batches holding them;
        ``whole_batches``: ``max_records`` is soft, acquisition ends at the end of the batch
        holding the ``max_records``-th offset (KIP-1206's batch_optimized), unless that batch
        alone holds more than ``max_records`` records and the partition is ``shared`` (other
        members' share sessions read it here): it is then split at ``max_records``, so one
        consumer does not take a whole large batch (and the in-flight window) while the
        group's other members wait."""
        partition, error = self.replica_manager.leader_partition(tp)
        if partition is None:
            return ShareFetchResult(error)
        key = (group_id, topic_id, tp.partition)
        self._topic_names[topic_id] = tp.topic
        share_partition = self._led(key, partition)
        configs = self.group_config(group_id)
        if share_partition is None:
            if self.persister is not None:
                return ShareFetchResult(self._load_errors.pop(key, ErrorCode.NONE))
            share_partition = self._create(key, partition, configs, None)
        lock_ms = int(configs.get(SHARE_RECORD_LOCK_DURATION, self.limits.record_lock_duration_ms))
        if share_partition.limits.record_lock_duration_ms != lock_ms:
            share_partition.limits = dataclasses.replace(
                share_partition.limits, record_lock_duration_ms=lock_ms
            )
        now = self.clock_ms()
        changed = share_partition.expire_locks(now) > 0
        log_start = partition.log.log_start_offset
        if share_partition.start_offset < log_start:
            share_partition.reset(log_start)
            changed = True
        if changed:
            self._persist(key, share_partition)
        first = _first_available(share_partition)
        read_committed = configs.get(SHARE_ISOLATION_LEVEL) == "read_committed"
        upper = partition.log.last_stable_offset if read_committed else partition.high_watermark
        if first >= upper or max_records <= 0:
            return ShareFetchResult(ErrorCode.NONE)
        data = partition.read(first, max_bytes, min_one_batch=True, read_committed=read_committed)
        last = _last_offset(data)
        if last < first:
            return ShareFetchResult(ErrorCode.NONE)
        end = min(last + 1, upper)
        limit = max_records
        if whole_batches:
            batch_start, batch_end = _batch_holding(data, first + max_records - 1)
            if not shared or batch_end - batch_start <= max_records:
                limit = max(max_records, min(batch_end, end) - first)
        acquired = share_partition.acquire(member_id, end, limit, now)
        if read_committed and acquired:
            aborted = _aborted_ranges(data, partition.log.collect_aborted_txns(first, upper))
            dropped = [
                offset
                for run in acquired
                for offset in range(run.first_offset, run.last_offset + 1)
                if any(lo <= offset <= hi for lo, hi in aborted)
            ]
            if share_partition.archive_acquired(dropped):
                self._persist(key, share_partition)
                acquired = _without(acquired, set(dropped))
        if not acquired:
            return ShareFetchResult(ErrorCode.NONE)
        return ShareFetchResult(ErrorCode.NONE, _through(data, acquired[-1].last_offset), acquired)

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic_id: uuid.UUID,
        partition: int,
        batches: Iterable[tuple[int, int, Sequence[int]]],
    ) -> ErrorCode:
        """Apply acknowledgement batches (first offset, last offset, types) of one partition."""
        share_partition = self.share_partitions.get((group_id, topic_id, partition))
        if share_partition is None:
            return ErrorCode.INVALID_RECORD_STATE
        now = self.clock_ms()
        share_partition.expire_locks(now)
        start = share_partition.start_offset
        result = ErrorCode.NONE
        released = False
        for first, last, types in batches:
            error = share_partition.acknowledge(member_id, first, last, types, now)
            if error:
                result = error
            released = released or _RELEASE in types
        self._persist((group_id, topic_id, partition), share_partition)
        if released or share_partition.start_offset != start:
            # Records to hand out again, or the in-flight window moved on: a member parked
            # on a full window may acquire now.
            self._wake(topic_id, partition)
        return result

    def release_member(
        self, group_id: str, member_id: str, keys: Iterable[tuple[uuid.UUID, int]]
    ) -> None:
        """Release what ``member_id`` holds on ``keys`` (its share session closed)."""
        for topic_id, partition in keys:
            key = (group_id, topic_id, partition)
            share_partition = self.share_partitions.get(key)
            if share_partition is not None and share_partition.release_member(member_id):
                self._persist(key, share_partition)
                self._wake(topic_id, partition)

    def next_lock_deadline(
        self, group_id: str, keys: Iterable[tuple[uuid.UUID, int]]
    ) -> int | None:
        """The earliest acquisition lock deadline (``clock_ms``) on ``group_id``'s
        share-partitions of ``keys``; None when no record there is acquired."""
        deadlines = []
        for topic_id, partition in keys:
            share_partition = self.share_partitions.get((group_id, topic_id, partition))
            deadline = None if share_partition is None else share_partition.next_lock_deadline()
            if deadline is not None:
                deadlines.append(deadline)
        return min(deadlines) if deadlines else None

    def _wake(self, topic_id: uuid.UUID, partition: int) -> None:
        """Records of the partition became available again: wake the ShareFetches parked on
        it (in the fetch purgatory, which appends notify too)."""
        name = self._topic_names.get(topic_id)
        if name is not None:
            self.replica_manager.fetch_purgatory.notify(TopicPartition(name, partition))

    # -- loading and persisting ------------------------------------------------------------

    def prepare(
        self,
        group_id: str,
        partitions: Iterable[tuple[uuid.UUID, str, int]],
        refresh: bool = False,
    ) -> list[asyncio.Task[None]]:
        """Start loading the share-partitions of ``group_id`` on ``partitions`` (topic id,
        name, index) this node leads and has not loaded (with ``refresh``, a new share
        session: also those loaded with nothing acquired, whose state may have been altered
        since); the loads still running."""
        if self.persister is None:
            return []
        running = []
        for topic_id, name, index in partitions:
            key = (group_id, topic_id, index)
            if refresh and key not in self._loads:
                self.invalidate(key)
            task = self._loads.get(key)
            if task is None:
                partition, _ = self.replica_manager.leader_partition(TopicPartition(name, index))
                if partition is None or self._led(key, partition) is not None:
                    continue
                self._topic_names[topic_id] = name
                task = asyncio.get_running_loop().create_task(
                    self._load_state(key, partition.tp, partition.leader_epoch)
                )
                self._loads[key] = task
                task.add_done_callback(functools.partial(self._loaded, key))
            running.append(task)
        return running

    def persisted(self, keys: Iterable[_Key]) -> dict[_Key, asyncio.Future[int]]:
        """Futures of the state changes of ``keys`` not yet persisted, each resolved with its
        write's error code; taken in the turn of the loop that made the changes."""
        return self._writer.waiters(keys)

    def _loaded(self, key: _Key, task: asyncio.Task[None]) -> None:
        if self._loads.get(key) is task:
            del self._loads[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("loading the share state of %s failed", key, exc_info=task.exception())
            self._load_errors[key] = ErrorCode.UNKNOWN_SERVER_ERROR

    def _led(self, key: _Key, partition: Partition) -> SharePartition | None:
        """The loaded share-partition of ``key`` when it was loaded at the partition's leader
        epoch of now (one of another epoch is dropped: leadership moved and came back)."""
        share_partition = self.share_partitions.get(key)
        if share_partition is not None and self._leader_epochs.get(key) != partition.leader_epoch:
            self.share_partitions.pop(key, None)
            return None
        return share_partition

    async def _load_state(self, key: _Key, tp: TopicPartition, leader_epoch: int) -> None:
        assert self.persister is not None
        await self._writer.flush([key])  # a write of the previous load goes first
        code, snapshot = await self.persister.read(key, leader_epoch)
        partition, _ = self.replica_manager.leader_partition(tp)
        if partition is None or partition.leader_epoch != leader_epoch:
            return  # leadership moved while loading
        if code:
            log.info("share state of %s not loaded: %s", key, ErrorCode(code).name)
            self._load_errors[key] = code
            return
        if key not in self.share_partitions:
            share_partition = self._create(key, partition, self.group_config(key[0]), snapshot)
            log.info(
                "share-partition %s-%d of %s loaded at leader epoch %d: start offset %d, "
                "%d in flight%s",
                tp.topic,
                tp.partition,
                key[0],
                leader_epoch,
                share_partition.start_offset,
                sum(1 for _ in share_partition.in_flight()),
                "" if snapshot is not None else " (new)",
            )
        self._wake(key[1], key[2])

    def _write_state(self, key: _Key, snapshot: ShareSnapshotValue | None) -> Awaitable[int]:
        assert self.persister is not None
        if snapshot is None:
            return self.persister.delete(key)
        return self.persister.write(key, snapshot)

    def _fenced(self, key: _Key, code: int) -> None:
        """The coordinator refused a write of ``key`` (a newer leader, or its offsets were
        altered): load it again at the next fetch."""
        log.info("share state of %s fenced (%s): reloading", key, ErrorCode(code).name)
        self.share_partitions.pop(key, None)
        self._leader_epochs.pop(key, None)

    def invalidate(self, key: _Key) -> None:
        """The state of ``key`` was changed at its share coordinator (offsets altered or
        deleted): drop this node's copy unless records are acquired there (a write of that
        copy is fenced then, and it is reloaded)."""
        share_partition = self.share_partitions.get(key)
        if share_partition is not None and share_partition.next_lock_deadline() is None:
            self.share_partitions.pop(key, None)
            self._leader_epochs.pop(key, None)

    def _create(
        self,
        key: _Key,
        partition: Partition,
        configs: Mapping[str, str],
        snapshot: ShareSnapshotValue | None,
    ) -> SharePartition:
        self._leader_epochs[key] = partition.leader_epoch
        if snapshot is not None:
            share_partition = _from_snapshot(snapshot, self.limits)
            self.share_partitions[key] = share_partition
            self._state_epochs[key] = snapshot.state_epoch
            return share_partition
        start = self._reset_offset(partition, configs.get(SHARE_AUTO_OFFSET_RESET, "latest"))
        share_partition = SharePartition(start, self.limits)
        self.share_partitions[key] = share_partition
        self._state_epochs[key] = 0
        self._persist(key, share_partition)
        return share_partition

    def _reset_offset(self, partition: Partition, reset: str) -> int:
        """Where a new share-partition starts under ``share.auto.offset.reset``."""
        if reset.lower() == "earliest":
            return partition.log.log_start_offset
        duration_ms = auto_offset_reset_duration_ms(reset)
        if duration_ms is None:
            return partition.high_watermark
        found = partition.log.fetch_offset_by_timestamp(self.wall_clock_ms() - duration_ms)
        if found is None:
            return partition.high_watermark
        return min(found.offset, partition.high_watermark)

    def _persist(self, key: _Key, share_partition: SharePartition) -> None:
        if self.persister is not None:
            snapshot = snapshot_of(
                share_partition,
                self._leader_epochs.get(key, -1),
                self.clock_ms(),
                max(0, self._state_epochs.get(key, 0)),
            )
            self._writer.write(key, snapshot)


def _from_snapshot(snapshot: ShareSnapshotValue, limits: SharePartitionLimits) -> SharePartition:
    share_partition = SharePartition(snapshot.start_offset, limits)
    restore(share_partition, snapshot)
    return share_partition


def _first_available(share_partition: SharePartition) -> int:
    """The lowest offset a fetch may hand out: an AVAILABLE in-flight record, else the end."""
    for offset, record in share_partition.in_flight():
        if record.state is RecordState.AVAILABLE:
            return offset
    return share_partition.end_offset


def _aborted_ranges(data: FetchDataInfo, aborted: Sequence[AbortedTxn]) -> list[tuple[int, int]]:
    """The offset ranges of ``data``'s transactional data batches that ``aborted`` covers
    (a batch of the aborted transaction's producer from its first offset to its marker)."""
    if not aborted:
        return []
    out = []
    for buffer in data.buffers:
        for header in iter_batch_headers(buffer):
            if not header.is_transactional or header.is_control:
                continue
            for txn in aborted:
                if (
                    txn.producer_id == header.producer_id
                    and txn.first_offset <= header.base_offset <= txn.last_offset
                ):
                    out.append((header.base_offset, header.last_offset))
                    break
    return out


def _without(acquired: Sequence[AcquiredRecords], dropped: set[int]) -> list[AcquiredRecords]:
    """``acquired``'s runs with the ``dropped`` offsets taken out (split where needed)."""
    out: list[AcquiredRecords] = []
    for run in acquired:
        start = None
        for offset in range(run.first_offset, run.last_offset + 2):
            kept = offset <= run.last_offset and offset not in dropped
            if kept and start is None:
                start = offset
            elif not kept and start is not None:
                out.append(dataclasses.replace(run, first_offset=start, last_offset=offset - 1))
                start = None
    return out


def _through(data: FetchDataInfo, offset: int) -> FetchDataInfo:
    """``data`` up to the batch holding ``offset`` (included): a fetch answers the batches of
    the records it acquired, not the whole read (which may reach ``max_bytes``)."""
    buffers: list[bytes | memoryview] = []
    size = 0
    for buffer in data.buffers:
        end = 0
        for header in iter_batch_headers(buffer):
            if header.base_offset > offset:
                break
            end = header.position + header.size
        if end:
            buffers.append(memoryview(buffer)[:end] if end < len(buffer) else buffer)
            size += end
        if end < len(buffer):
            break
    return FetchDataInfo(buffers, size, data.first_offset)


def _batch_holding(data: FetchDataInfo, offset: int) -> tuple[int, int]:
    """The first offset and the offset after the batch of ``data`` holding ``offset`` (the
    last batch when none holds it; (-1, -1) when there is none)."""
    found = (-1, -1)
    for buffer in data.buffers:
        for header in iter_batch_headers(buffer):
            found = (header.base_offset, header.last_offset + 1)
            if header.last_offset >= offset:
                return found
    return found


def _last_offset(data: FetchDataInfo) -> int:
    """The last offset of the whole batches in ``data`` (-1 when there are none)."""
    last = -1
    for buffer in data.buffers:
        for header in iter_batch_headers(buffer):
            last = header.last_offset
    return last
