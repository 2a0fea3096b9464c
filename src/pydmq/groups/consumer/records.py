"""Consumer-group (KIP-848) records of ``__consumer_offsets`` (sans-IO).

The layouts are declared once, in ``protocol/codegen/schemas/records/consumer_group.json``,
and the codec is generated from them (:mod:`pydmq.groups.consumer.generated_records`). Every
key and value starts with an int16 version; the key versions (3-8) are distinct from the
classic ones (0-2) so one replay reads both, and say which record a key belongs to:

==== ================================ ===========================================================
key  record                           value
==== ================================ ===========================================================
3    group metadata (group)           group epoch
4    partition metadata (group)       subscribed topics: name, topic id, partition count
5    member metadata (group, member)  :class:`MemberMetadataValue`
6    target metadata (group)          target assignment epoch
7    target member (group, member)    partitions
8    current member (group, member)   :class:`CurrentMemberValue`
==== ================================ ===========================================================

This module maps the generated values to the coordinator's shapes: partition sets are
``{topic id: partitions}`` (written sorted, empty sets left out), subscribed topics
``{name: (topic id, partition count)}`` (written sorted by name). A null value deletes its
key. Decoders bound every length and raise :class:`~pydmq.groups.records.GroupRecordError`
on malformed input. :class:`ConsumerGroupRecord` is one record, typed, as a write builds it
and as the load decodes it (the builders below make each kind).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydmq.groups.consumer import generated_records as gen
from pydmq.groups.consumer.generated_records import (
    ConsumerGroupKey,
    MemberMetadataValue,
    TopicPartitions,
)
from pydmq.groups.records import decoded
from pydmq.protocol.primitives import Buffer

__all__ = [
    "CONSUMER_KEY_VERSIONS",
    "ConsumerGroupKey",
    "ConsumerGroupRecord",
    "CurrentMemberValue",
    "MemberMetadataValue",
    "current_member_record",
    "decode_consumer_key",
    "decode_consumer_record",
    "decode_current_member",
    "decode_epoch",
    "decode_member_metadata",
    "decode_partition_metadata",
    "decode_partitions",
    "encode_current_member",
    "encode_epoch",
    "encode_member_metadata",
    "encode_partition_metadata",
    "encode_partitions",
    "group_epoch_record",
    "is_consumer_key",
    "member_metadata_record",
    "partition_metadata_record",
    "target_epoch_record",
    "target_member_record",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8
CONSUMER_KEY_VERSIONS = gen.KEY_VERSIONS

Partitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class CurrentMemberValue:
    """A member's epochs, state (a ``MemberState`` value) and current assignment."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    left_static: bool
    assigned: Partitions
    pending_revocation: Partitions


def is_consumer_key(data: bytes) -> bool:
    return len(data) >= 2 and int.from_bytes(data[:2], signed=True) in CONSUMER_KEY_VERSIONS


def decode_consumer_key(data: Buffer) -> ConsumerGroupKey:
    return decoded(gen.decode_key, data)


def _topic_partitions(parts: Partitions) -> tuple[TopicPartitions, ...]:
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


def _partitions(topics: tuple[TopicPartitions, ...]) -> Partitions:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topics}


def encode_epoch(epoch: int) -> bytes:
    return gen.ConsumerGroupEpochValue(epoch).encode()


def decode_epoch(data: Buffer) -> int:
    return decoded(gen.decode_consumer_group_epoch_value, data).epoch


def encode_partition_metadata(meta: dict[str, tuple[uuid.UUID, int]]) -> bytes:
    topics = tuple(gen.TopicMetadata(name, *meta[name]) for name in sorted(meta))
    return gen.ConsumerGroupPartitionMetadataValue(topics).encode()


def decode_partition_metadata(data: Buffer) -> dict[str, tuple[uuid.UUID, int]]:
    value = decoded(gen.decode_consumer_group_partition_metadata_value, data)
    return {t.topic_name: (t.topic_id, t.num_partitions) for t in value.topics}


def encode_partitions(parts: Partitions) -> bytes:
    return gen.ConsumerGroupTargetAssignmentMemberValue(_topic_partitions(parts)).encode()


def decode_partitions(data: Buffer) -> Partitions:
    value = decoded(gen.decode_consumer_group_target_assignment_member_value, data)
    return _partitions(value.topic_partitions)


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    return v.encode()


def decode_member_metadata(data: Buffer) -> MemberMetadataValue:
    return decoded(gen.decode_member_metadata_value, data)


def encode_current_member(v: CurrentMemberValue) -> bytes:
    return gen.ConsumerGroupCurrentMemberAssignmentValue(
        v.member_epoch,
        v.previous_member_epoch,
        v.state,
        v.left_static,
        _topic_partitions(v.assigned),
        _topic_partitions(v.pending_revocation),
    ).encode()


def decode_current_member(data: Buffer) -> CurrentMemberValue:
    value = decoded(gen.decode_consumer_group_current_member_assignment_value, data)
    return CurrentMemberValue(
        value.member_epoch,
        value.previous_member_epoch,
        value.state,
        value.left_static,
        _partitions(value.assigned_partitions),
        _partitions(value.partitions_pending_revocation),
    )


SubscriptionMetadata: TypeAlias = dict[str, tuple[uuid.UUID, int]]
ConsumerGroupValue: TypeAlias = (
    int | SubscriptionMetadata | MemberMetadataValue | Partitions | CurrentMemberValue
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """One consumer-group record: its key and typed value (None: a tombstone). The value's
    type follows ``key.kind``: an epoch (group and target metadata), the subscription metadata
    (partition metadata), a :class:`MemberMetadataValue`, the partitions of a member's target,
    or a :class:`CurrentMemberValue`."""

    key: ConsumerGroupKey
    value: ConsumerGroupValue | None

    def encode(self) -> tuple[bytes, bytes | None]:
        value = self.value
        if value is None:
            return self.key.encode(), None
        return self.key.encode(), _CODECS[self.key.kind][0](value)


def decode_consumer_record(key: Buffer, value: Buffer | None) -> ConsumerGroupRecord:
    """The record stored as ``key``/``value`` (raises ``GroupRecordError`` if malformed)."""
    decoded_key = decode_consumer_key(key)
    if value is None:
        return ConsumerGroupRecord(decoded_key, None)
    return ConsumerGroupRecord(decoded_key, _CODECS[decoded_key.kind][1](value))


_CODECS: dict[int, tuple[Callable[[Any], bytes], Callable[[Buffer], ConsumerGroupValue]]] = {
    GROUP_METADATA: (encode_epoch, decode_epoch),
    PARTITION_METADATA: (encode_partition_metadata, decode_partition_metadata),
    MEMBER_METADATA: (encode_member_metadata, decode_member_metadata),
    TARGET_METADATA: (encode_epoch, decode_epoch),
    TARGET_MEMBER: (encode_partitions, decode_partitions),
    CURRENT_MEMBER: (encode_current_member, decode_current_member),
}
"""Each kind's value encoder and decoder."""


def group_epoch_record(group_id: str, epoch: int | None) -> ConsumerGroupRecord:
    """The group's epoch (None: the group is deleted)."""
    return ConsumerGroupRecord(ConsumerGroupKey(GROUP_METADATA, group_id), epoch)


def partition_metadata_record(
    group_id: str, metadata: SubscriptionMetadata | None
) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupKey(PARTITION_METADATA, group_id), metadata)


def member_metadata_record(
    group_id: str, member_id: str, value: MemberMetadataValue | None
) -> ConsumerGroupRecord:
    """A member's metadata (None: the member leaves the group)."""
    return ConsumerGroupRecord(ConsumerGroupKey(MEMBER_METADATA, group_id, member_id), value)


def target_epoch_record(group_id: str, epoch: int | None) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupKey(TARGET_METADATA, group_id), epoch)


def target_member_record(
    group_id: str, member_id: str, partitions: Partitions | None
) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupKey(TARGET_MEMBER, group_id, member_id), partitions)


def current_member_record(
    group_id: str, member_id: str, value: CurrentMemberValue | None
) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(ConsumerGroupKey(CURRENT_MEMBER, group_id, member_id), value)
