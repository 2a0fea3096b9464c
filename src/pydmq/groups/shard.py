"""GroupCoordinatorShard: the group coordinator's state of one ``__consumer_offsets``
partition, hosted by the :class:`~pydmq.coordinator.runtime.CoordinatorRuntime`.

The committed offsets (:class:`~pydmq.groups.offsets.OffsetMetadataManager`) live here and
change only by replay; so do the partition's classic groups
(:class:`~pydmq.groups.classic.manager.ClassicGroupManager`), changed in place. The shard's records (:data:`GroupRecord`) are offset commits, typed, and
classic or consumer group records, kept encoded (:class:`EncodedGroupRecord`);
:class:`GroupRecordSerde` converts them for ``__consumer_offsets``. Classic and KIP-848 groups change in place and their records are written through the runtime
(KIP-848 groups are still kept by the :class:`~pydmq.groups.coordinator.GroupCoordinator`):
the shard collects their records while the partition loads (:class:`GroupLoad`) and hands
them over when the load completes; afterwards it replays only offset records.
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
from pydmq.groups.consumer.coordinator import ConsumerGroupLoad
from pydmq.groups.consumer.records import is_consumer_key
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
    """A classic or KIP-848 group record, written encoded: those groups still change in place
    and are rebuilt from their records only when a partition loads."""

    key: bytes
    value: bytes | None


GroupRecord = OffsetCommitRecord | EncodedGroupRecord


class GroupRecordSerde:
    """:data:`GroupRecord` values <-> ``__consumer_offsets`` key and value bytes."""

    def serialize(self, record: GroupRecord) -> CoordinatorRecord:
        if isinstance(record, OffsetCommitRecord):
            value = None if record.value is None else record.value.encode()
            return record.key.encode(), value
        return record.key, record.value

    def deserialize(self, key: bytes | None, value: bytes | None) -> GroupRecord | None:
        if key is None:
            return None
        if is_consumer_key(key):
            return EncodedGroupRecord(key, value)
        try:
            decoded = decode_key(key)
            if isinstance(decoded, OffsetCommitKey):
                commit = None if value is None else decode_offset_commit_value(value)
                return OffsetCommitRecord(decoded, commit)
        except GroupRecordError as exc:
            log.warning("skipping undecodable __consumer_offsets record: %s", exc)
            return None
        return EncodedGroupRecord(key, value)


class GroupLoad:
    """The classic and consumer group records of a partition being loaded, by group id."""

    __slots__ = ("consumer", "metadata")

    def __init__(self) -> None:
        self.metadata: dict[str, GroupMetadataValue] = {}
        self.consumer: ConsumerGroupLoad = {}


class ShardOwner(Protocol):
    """What the shard needs of the group coordinator that keeps the groups."""

    def replay_consumer_record(
        self, key: bytes, value: bytes | None, into: ConsumerGroupLoad
    ) -> None: ...

    def shard_loaded(self, shard: GroupCoordinatorShard, load: GroupLoad) -> None: ...

    def shard_unloaded(self, shard: GroupCoordinatorShard) -> None: ...


class GroupCoordinatorShard:
    """One ``__consumer_offsets`` partition led here; owned by its runtime event queue."""

    __slots__ = ("_load", "_owner", "classic", "offsets", "partition", "timer")

    def __init__(
        self,
        partition: int,
        timer: CoordinatorTimer[GroupCoordinatorShard],
        owner: ShardOwner,
        offsets: OffsetMetadataManager,
        classic: ClassicGroupManager,
    ) -> None:
        self.partition = partition
        self.timer = timer
        self.offsets = offsets
        self.classic = classic
        self._owner = owner
        self._load: GroupLoad | None = GroupLoad()

    def replay(self, record: GroupRecord) -> None:
        if isinstance(record, OffsetCommitRecord):
            self.offsets.replay(record)
            return
        if self._load is None:
            return  # a group record of this node's write: the group changed already
        key, value = record.key, record.value
        try:
            if is_consumer_key(key):
                self._owner.replay_consumer_record(key, value, self._load.consumer)
                return
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
