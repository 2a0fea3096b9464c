"""The share coordinator (KIP-932): share-partition state, kept in ``__share_group_state``.

Kafka's ShareCoordinator, on the coordinator runtime (:mod:`pydmq.coordinator.runtime`): one
shard per ``__share_group_state`` partition this node leads, holding the last ShareSnapshot of
each share-partition whose key hashes there (:func:`~pydmq.shares.state_log.share_state_partition`).
Partition leaders (:mod:`pydmq.shares.persister`) call it in process or over the share-state
APIs (83-87), which its handlers serve:

- **read** (ReadShareGroupState): the state, at the caller's leader epoch. A leader epoch
  above the one stored is written first (the new partition leader fences the old one); below
  it the read is FENCED_LEADER_EPOCH. Unknown state: start offset -1, no batches.
- **write** (WriteShareGroupState): the whole state of the share-partition (pydmq's leaders send
  all in-flight batches, so a write replaces the snapshot). FENCED_LEADER_EPOCH from a leader
  epoch below the stored one, FENCED_STATE_EPOCH from a state epoch below it.
- **initialize** (InitializeShareGroupState): a new state at a start offset with nothing in
  flight, at a state epoch above the stored one (else FENCED_STATE_EPOCH).
- **delete** (DeleteShareGroupState): a tombstone.
- **summary** (ReadShareGroupStateSummary): start offset, epochs, delivery-complete count.

Writes of one share-partition run in order (keyed writes of the runtime: each sees the state
the previous one committed). Errors while the partition is not led here or still loads are
the runtime's (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS). Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from pydmq.coordinator.api import (
    CoordinatorError,
    CoordinatorRecord,
    CoordinatorResult,
)
from pydmq.coordinator.runtime import CoordinatorRuntime
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.protocol.errors import ErrorCode, MalformedFrameError
from pydmq.shares.generated_records import (
    KEY_VERSIONS,
    ShareSnapshotKey,
    ShareSnapshotValue,
    decode_key,
    decode_share_snapshot_value,
)
from pydmq.shares.state_log import SHARE_GROUP_STATE_TOPIC, ShareStateLog, StateKey

__all__ = [
    "ShareCoordinator",
    "ShareStateRecord",
]

log = logging.getLogger(__name__)

ShareStateRecord = tuple[StateKey, ShareSnapshotValue | None]
"""One record of ``__share_group_state``: a share-partition and its snapshot (None: deleted)."""

StateAnswer = tuple[int, ShareSnapshotValue | None]
"""An error code and the state it concerns (None: none)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareStateSerde:
    """ShareSnapshot records <-> their key and value bytes."""

    def serialize(self, record: ShareStateRecord) -> CoordinatorRecord:
        (group_id, topic_id, partition), value = record
        key = ShareSnapshotKey(group_id, topic_id, partition).encode()
        return key, None if value is None else value.encode()

    def deserialize(self, key: bytes | None, value: bytes | None) -> ShareStateRecord | None:
        if key is None or int.from_bytes(key[:2], "big") not in KEY_VERSIONS:
            return None  # not a snapshot (Kafka's ShareUpdate records are not written here)
        try:
            k = decode_key(key)
            snapshot = None if value is None else decode_share_snapshot_value(value)
        except MalformedFrameError as exc:
            log.warning("skipping undecodable %s record: %s", SHARE_GROUP_STATE_TOPIC, exc)
            return None
        return (k.group_id, k.topic_id, k.partition), snapshot


class ShareStateShard:
    """The snapshots of one ``__share_group_state`` partition (changed by replay only)."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.snapshots: dict[StateKey, ShareSnapshotValue] = {}

    def replay(self, record: ShareStateRecord) -> None:
        key, value = record
        if value is None:
            self.snapshots.pop(key, None)
        else:
            self.snapshots[key] = value

    def on_loaded(self) -> None:
        log.info(
            "%s-%d: %d share-partitions",
            SHARE_GROUP_STATE_TOPIC,
            self.partition,
            len(self.snapshots),
        )

    def on_unloaded(self) -> None:
        pass


def _write(key: StateKey, value: ShareSnapshotValue) -> Callable[[ShareStateShard], object]:
    def operation(shard: ShareStateShard) -> CoordinatorResult[ShareStateRecord, StateAnswer]:
        stored = shard.snapshots.get(key)
        if stored is not None and value.leader_epoch < stored.leader_epoch:
            return CoordinatorResult((), (ErrorCode.FENCED_LEADER_EPOCH, stored))
        if stored is not None and value.state_epoch < stored.state_epoch:
            return CoordinatorResult((), (ErrorCode.FENCED_STATE_EPOCH, stored))
        kept = value if stored is None else replace(value, create_timestamp=stored.create_timestamp)
        return CoordinatorResult([(key, kept)], (ErrorCode.NONE, kept))

    return operation


def _read(key: StateKey, leader_epoch: int) -> Callable[[ShareStateShard], object]:
    def operation(shard: ShareStateShard) -> CoordinatorResult[ShareStateRecord, StateAnswer]:
        stored = shard.snapshots.get(key)
        if stored is None or leader_epoch < 0 or leader_epoch == stored.leader_epoch:
            return CoordinatorResult((), (ErrorCode.NONE, stored))
        if leader_epoch < stored.leader_epoch:
            return CoordinatorResult((), (ErrorCode.FENCED_LEADER_EPOCH, stored))
        bumped = replace(stored, leader_epoch=leader_epoch, write_timestamp=_now_ms())
        return CoordinatorResult([(key, bumped)], (ErrorCode.NONE, bumped))

    return operation


def _initialize(
    key: StateKey, state_epoch: int, start_offset: int
) -> Callable[[ShareStateShard], object]:
    def operation(shard: ShareStateShard) -> CoordinatorResult[ShareStateRecord, StateAnswer]:
        stored = shard.snapshots.get(key)
        if stored is not None and state_epoch <= stored.state_epoch:
            return CoordinatorResult((), (ErrorCode.FENCED_STATE_EPOCH, stored))
        now = _now_ms()
        value = ShareSnapshotValue(
            snapshot_epoch=0,
            state_epoch=state_epoch,
            leader_epoch=-1 if stored is None else stored.leader_epoch,
            start_offset=start_offset,
            create_timestamp=now,
            write_timestamp=now,
            state_batches=(),
            delivery_complete_count=0,
        )
        return CoordinatorResult([(key, value)], (ErrorCode.NONE, value))

    return operation


def _delete(key: StateKey) -> Callable[[ShareStateShard], object]:
    def operation(shard: ShareStateShard) -> CoordinatorResult[ShareStateRecord, StateAnswer]:
        if key not in shard.snapshots:
            return CoordinatorResult((), (ErrorCode.NONE, None))
        return CoordinatorResult([(key, None)], (ErrorCode.NONE, None))

    return operation


class ShareCoordinator:
    """This node's share coordinator over the ``__share_group_state`` partitions it leads
    (every partition on a single node); see the module."""

    def __init__(self, state_log: ShareStateLog, *, owns_all_partitions: bool) -> None:
        self.state_log = state_log
        self._owns_all = owns_all_partitions
        self._runtime: CoordinatorRuntime[ShareStateShard, ShareStateRecord] = CoordinatorRuntime(
            SHARE_GROUP_STATE_TOPIC, state_log, ShareStateSerde(), self._build_shard
        )

    @property
    def owns_all(self) -> bool:
        """Whether this node leads every partition (a single node)."""
        return self._owns_all

    def _build_shard(
        self, partition: int, timer: CoordinatorTimer[ShareStateShard]
    ) -> ShareStateShard:
        return ShareStateShard(partition)

    # -- ownership ---------------------------------------------------------------------
    def load(self) -> None:
        """A single node: load every partition of the topic, when it exists."""
        if self._owns_all and self.state_log.exists:
            for partition in range(self.state_log.num_partitions):
                self._runtime.load_now(partition)

    def stop(self) -> None:
        self._runtime.close()

    def on_elected(self, partition: int, leader_epoch: int) -> asyncio.Task[None] | None:
        if self._owns_all:
            return None
        return self._runtime.schedule_load(partition, leader_epoch)

    def on_resigned(self, partition: int, leader_epoch: int | None = None) -> None:
        if not self._owns_all:
            self._runtime.schedule_unload(partition, leader_epoch)

    def leads(self, key: StateKey) -> bool:
        """Whether the partition of ``key`` is led here (a single node leads every one)."""
        if self._owns_all:
            return True
        return self.state_log.partition_for(key) in self._runtime.partitions()

    def _partition(self, key: StateKey) -> int:
        """The partition of ``key``, loaded (a single node loads it on first use, creating
        the topic if needed)."""
        if self._owns_all:
            self.state_log.ensure_created()
        partition = self.state_log.partition_for(key)
        if self._owns_all:
            self._runtime.load_now(partition)
        return partition

    # -- operations ----------------------------------------------------------------------
    async def _run(
        self, key: StateKey, operation: Callable[[ShareStateShard], object]
    ) -> StateAnswer:
        try:
            partition = self._partition(key)
            future: asyncio.Future[StateAnswer] = self._runtime.schedule_write(
                partition,
                operation,  # type: ignore[arg-type]
                key=key,
            )
            answer = await future
        except CoordinatorError as exc:
            return exc.error_code, None
        except Exception as exc:  # a topic the node could not create
            code = getattr(exc, "error_code", ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return int(code), None
        return answer

    async def read_state(self, key: StateKey, leader_epoch: int) -> StateAnswer:
        return await self._run(key, _read(key, leader_epoch))

    async def write_state(self, key: StateKey, value: ShareSnapshotValue) -> StateAnswer:
        return await self._run(key, _write(key, value))

    async def initialize_state(
        self, key: StateKey, state_epoch: int, start_offset: int
    ) -> StateAnswer:
        return await self._run(key, _initialize(key, state_epoch, start_offset))

    async def delete_state(self, key: StateKey) -> StateAnswer:
        return await self._run(key, _delete(key))

    def summary(self, key: StateKey) -> StateAnswer:
        """The committed state of ``key`` (no write)."""
        try:
            partition = self._partition(key)
            stored = self._runtime.read(partition, lambda shard: shard.snapshots.get(key))
        except CoordinatorError as exc:
            return exc.error_code, None
        return ErrorCode.NONE, stored

    def snapshots(self) -> Iterator[tuple[StateKey, ShareSnapshotValue]]:
        """Every share-partition state of the partitions loaded here."""
        for partition in self._runtime.active_partitions():
            yield from self._runtime.read(partition, lambda shard: list(shard.snapshots.items()))
