"""GroupCoordinatorShard: the group coordinator's state of one ``__consumer_offsets``
partition, hosted by the :class:`~pydmq.coordinator.runtime.CoordinatorRuntime`.

The shard is the partition's group metadata: its committed offsets
(:class:`~pydmq.groups.offsets.OffsetMetadataManager`), its KIP-848 consumer groups
(:class:`~pydmq.groups.consumer.manager.ConsumerGroupManager`) and its classic groups
(:class:`~pydmq.groups.classic.manager.ClassicGroupManager`). Every record the shard replays,
at load and once a write of this node is committed, goes to its owner by type
(:data:`GroupRecord`: offset commits, consumer group records, classic group records);
:class:`GroupRecordSerde` converts them for ``__consumer_offsets``. The shard takes part in
transactions (a :class:`~pydmq.coordinator.api.TransactionalCoordinatorShard`): offset commits
of transactional batches (TxnOffsetCommit) stay pending per producer id until the replay of
the producer's end-transaction marker commits or aborts them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from pydmq.coordinator.api import CoordinatorError, CoordinatorRecord, TransactionResult
from pydmq.coordinator.runtime import CoordinatorRuntime
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.classic.manager import ClassicGroupManager
from pydmq.groups.consumer.manager import ConsumerGroupManager
from pydmq.groups.consumer.records import (
    ConsumerGroupRecord,
    decode_consumer_record,
    is_consumer_key,
)
from pydmq.groups.offsets import (
    OffsetAndMetadata,
    OffsetCommitRecord,
    OffsetMetadataManager,
    TopicPartitionKey,
)
from pydmq.groups.records import (
    GroupMetadataRecord,
    GroupRecordError,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

__all__ = [
    "CommittedOffsets",
    "GroupCoordinatorShard",
    "GroupRecord",
    "GroupRecordSerde",
    "ShardOwner",
]

log = logging.getLogger(__name__)

R = TypeVar("R")


GroupRecord = OffsetCommitRecord | ConsumerGroupRecord | GroupMetadataRecord


class GroupRecordSerde:
    """:data:`GroupRecord` values <-> ``__consumer_offsets`` key and value bytes."""

    def serialize(self, record: GroupRecord) -> CoordinatorRecord:
        if isinstance(record, OffsetCommitRecord):
            value = None if record.value is None else record.value.encode()
            return record.key.encode(), value
        return record.encode()

    def deserialize(self, key: bytes | None, value: bytes | None) -> GroupRecord | None:
        if key is None:
            return None
        try:
            if is_consumer_key(key):
                return decode_consumer_record(key, value)
            decoded = decode_key(key)
            if isinstance(decoded, OffsetCommitKey):
                commit = None if value is None else decode_offset_commit_value(value)
                return OffsetCommitRecord(decoded, commit)
            metadata = None if value is None else decode_group_metadata_value(value)
            return GroupMetadataRecord(decoded.group, metadata)
        except GroupRecordError as exc:
            log.warning("skipping undecodable __consumer_offsets record: %s", exc)
            return None


class ShardOwner(Protocol):
    """What the shard needs of the group coordinator that routes to it."""

    def shard_loaded(self, shard: GroupCoordinatorShard) -> None: ...

    def shard_unloaded(self, shard: GroupCoordinatorShard) -> None: ...


class GroupCoordinatorShard:
    """One ``__consumer_offsets`` partition led here (Kafka's GroupCoordinatorShard with its
    GroupMetadataManager and OffsetMetadataManager); owned by its runtime event queue."""

    __slots__ = ("_owner", "classic", "consumer", "offsets", "partition", "timer")

    def __init__(
        self,
        partition: int,
        timer: CoordinatorTimer[GroupCoordinatorShard],
        owner: ShardOwner,
        offsets: OffsetMetadataManager,
        classic: ClassicGroupManager,
        consumer: ConsumerGroupManager,
    ) -> None:
        self.partition = partition
        self.timer = timer
        self.offsets = offsets
        self.classic = classic
        self.consumer = consumer
        self._owner = owner

    def replay(self, record: GroupRecord) -> None:
        if isinstance(record, OffsetCommitRecord):
            self.offsets.replay(record)
        elif isinstance(record, ConsumerGroupRecord):
            self.consumer.replay(record)
        else:
            self.classic.replay(record)

    def replay_transactional(
        self, record: GroupRecord, producer_id: int, producer_epoch: int
    ) -> None:
        """A record of a transactional batch: an offset commit stays pending until the
        transaction ends, and its group exists from then on, whatever the transaction's
        outcome (an Empty simple classic group unless it is a consumer group; live, the
        commit's validation created it already), as Kafka's replay; any other record is
        applied as usual."""
        if isinstance(record, OffsetCommitRecord):
            self.offsets.replay_transactional(record, producer_id)
            group_id = record.key.group
            if record.value is not None and group_id not in self.consumer.groups:
                self.classic.ensure_group(group_id)
        else:
            self.replay(record)

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: TransactionResult
    ) -> None:
        self.offsets.replay_end_transaction_marker(producer_id, result is TransactionResult.COMMIT)

    def on_loaded(self) -> None:
        self._owner.shard_loaded(self)

    def on_unloaded(self) -> None:
        self._owner.shard_unloaded(self)


class CommittedOffsets:
    """Reads of the committed offsets of the groups coordinated here, each from its
    partition's shard (nothing for a group whose partition is not loaded here); event loop."""

    __slots__ = ("_partition_for", "_runtime")

    def __init__(
        self,
        runtime: CoordinatorRuntime[GroupCoordinatorShard, GroupRecord],
        partition_for: Callable[[str], int],
    ) -> None:
        self._runtime = runtime
        self._partition_for = partition_for

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._read(group_id, lambda offsets: offsets.get(group_id, topic, partition), None)

    def has_offsets(self, group_id: str) -> bool:
        return self._read(group_id, lambda offsets: offsets.has_offsets(group_id), False)

    def all(self, group_id: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return self._read(group_id, lambda offsets: offsets.all(group_id), {})

    def all_partitions(self, group_id: str) -> list[TopicPartitionKey]:
        """Partitions with a committed or a pending transactional offset of the group."""
        return self._read(group_id, lambda offsets: offsets.all_partitions(group_id), [])

    def _read(self, group_id: str, read: Callable[[OffsetMetadataManager], R], default: R) -> R:
        try:
            return self._runtime.read(
                self._partition_for(group_id), lambda shard: read(shard.offsets)
            )
        except CoordinatorError:
            return default
