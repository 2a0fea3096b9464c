"""GroupCoordinatorShard: the group coordinator's state of one ``__consumer_offsets``
partition, hosted by the :class:`~pydmq.coordinator.runtime.CoordinatorRuntime`.

The shard is the partition's group metadata: its committed offsets
(:class:`~pydmq.groups.offsets.OffsetMetadataManager`) and its KIP-848 consumer groups
(:class:`~pydmq.groups.consumer.manager.ConsumerGroupManager`), both changed only by replay,
and its classic groups (:class:`~pydmq.groups.classic.manager.ClassicGroupManager`), still
changed in place. The shard's records (:data:`GroupRecord`) are offset commits and consumer
group records, typed, and classic group records, kept encoded (:class:`EncodedGroupRecord`);
:class:`GroupRecordSerde` converts them for ``__consumer_offsets``. Classic groups' records
are written through the runtime after the group changed: the shard collects them while the
partition loads (:class:`GroupLoad`) and hands them over when the load completes; afterwards
it skips them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydmq.coordinator.api import CoordinatorError, CoordinatorRecord
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
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecordError,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

__all__ = [
    "CommittedOffsets",
    "EncodedGroupRecord",
    "GroupCoordinatorShard",
    "GroupLoad",
    "GroupRecord",
    "GroupRecordSerde",
    "ShardOwner",
]

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class EncodedGroupRecord:
    """A classic group record, written encoded: classic groups still change in place and are
    rebuilt from their records only when a partition loads."""

    key: bytes
    value: bytes | None


GroupRecord = OffsetCommitRecord | ConsumerGroupRecord | EncodedGroupRecord


class GroupRecordSerde:
    """:data:`GroupRecord` values <-> ``__consumer_offsets`` key and value bytes."""

    def serialize(self, record: GroupRecord) -> CoordinatorRecord:
        if isinstance(record, OffsetCommitRecord):
            value = None if record.value is None else record.value.encode()
            return record.key.encode(), value
        if isinstance(record, ConsumerGroupRecord):
            return record.encode()
        return record.key, record.value

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
        except GroupRecordError as exc:
            log.warning("skipping undecodable __consumer_offsets record: %s", exc)
            return None
        return EncodedGroupRecord(key, value)


class GroupLoad:
    """The classic group records of a partition being loaded, by group id."""

    __slots__ = ("metadata",)

    def __init__(self) -> None:
        self.metadata: dict[str, GroupMetadataValue] = {}


class ShardOwner(Protocol):
    """What the shard needs of the group coordinator that routes to it."""

    def shard_loaded(self, shard: GroupCoordinatorShard, load: GroupLoad) -> None: ...

    def shard_unloaded(self, shard: GroupCoordinatorShard) -> None: ...


class GroupCoordinatorShard:
    """One ``__consumer_offsets`` partition led here (Kafka's GroupCoordinatorShard with its
    GroupMetadataManager and OffsetMetadataManager); owned by its runtime event queue."""

    __slots__ = ("_load", "_owner", "classic", "consumer", "offsets", "partition", "timer")

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
        self._load: GroupLoad | None = GroupLoad()

    def replay(self, record: GroupRecord) -> None:
        if isinstance(record, OffsetCommitRecord):
            self.offsets.replay(record)
            return
        if isinstance(record, ConsumerGroupRecord):
            self.consumer.replay(record)
            return
        if self._load is None:
            return  # a classic group record of this node's write: the group changed already
        key, value = record.key, record.value
        try:
            decoded = decode_key(key)
            if not isinstance(decoded, GroupMetadataKey):
                return
            if value is None:
                self._load.metadata.pop(decoded.group, None)
            else:
                self._load.metadata[decoded.group] = decode_group_metadata_value(value)
        except GroupRecordError as exc:
            log.warning("skipping undecodable __consumer_offsets record: %s", exc)

    def on_loaded(self) -> None:
        load, self._load = self._load, None
        self._owner.shard_loaded(self, load or GroupLoad())

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

    def _read(self, group_id: str, read: Callable[[OffsetMetadataManager], R], default: R) -> R:
        try:
            return self._runtime.read(
                self._partition_for(group_id), lambda shard: read(shard.offsets)
            )
        except CoordinatorError:
            return default
