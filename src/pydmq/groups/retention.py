"""Offsets retention of one ``__consumer_offsets`` shard, as a write (sans-IO).

Kafka 4's rules: committed offsets of a group expire ``offsets.retention.minutes`` after the
group became Empty (a classic group with a protocol type), else (simple consumers, KIP-848
groups without members) after their commit (or their explicit expiry); only groups without
members lose offsets, and an offset whose partition has pending transactional offsets is
kept, as is its group (Kafka's ``cleanupExpiredOffsets``). An Empty classic group left without offsets is then deleted (by the
replay of its tombstone), and so is a KIP-848 group without members left without offsets (its
group, partition-metadata and target-epoch tombstones; as Kafka's ``cleanupGroupMetadata``), in
a write of its own keyed by the group, so that it runs after a heartbeat in flight and finds the
member that heartbeat added. Every deletion is a tombstone: once the log cleaner has removed
the records and then the tombstones, a load rebuilds no deleted group or offset. Run by the
shard's retention timer and by ``GroupCoordinator.expire_offsets``.
"""

from __future__ import annotations

from pydmq.coordinator.api import CoordinatorResult
from pydmq.groups.classic.group import GroupState
from pydmq.groups.records import GroupMetadataRecord
from pydmq.groups.shard import GroupCoordinatorShard, GroupRecord

__all__ = ["expire", "expire_consumer_group", "expiring_consumer_groups"]


def expire(
    shard: GroupCoordinatorShard, now: int, retention_ms: int
) -> CoordinatorResult[GroupRecord, int]:
    """The tombstones of ``shard``'s expired offsets and of its Empty classic groups left
    without offsets; the response counts the offsets."""
    offsets = shard.offsets
    records: list[GroupRecord] = []
    expired = 0
    classic = shard.classic.groups
    for group in classic.values():
        group_id = group.group_id
        if not group.is_in(GroupState.EMPTY):
            continue
        base = group.state_timestamp_ms if group.protocol_type else None
        doomed = offsets.expired(group_id, now, retention_ms, base)
        records += offsets.delete_records(group_id, doomed)
        expired += len(doomed)
        if len(doomed) < offsets.count(group_id) or group.members:
            continue
        if offsets.has_pending(group_id):
            continue  # an open transaction holds offsets of the group: Kafka keeps it
        if base is not None and base + retention_ms > now:
            continue
        records.append(GroupMetadataRecord(group_id, None))
    for group_id, consumer_group in shard.consumer.groups.items():
        if consumer_group.members:
            continue
        doomed = offsets.expired(group_id, now, retention_ms, None)
        records += offsets.delete_records(group_id, doomed)
        expired += len(doomed)
    return CoordinatorResult(records, expired)


def expiring_consumer_groups(
    shard: GroupCoordinatorShard, now: int, retention_ms: int
) -> list[str]:
    """The KIP-848 groups of ``shard`` that :func:`expire_consumer_group` deletes."""
    return [g for g in shard.consumer.groups if _expiring(shard, g, now, retention_ms)]


def expire_consumer_group(
    shard: GroupCoordinatorShard, group_id: str, now: int, retention_ms: int
) -> CoordinatorResult[GroupRecord, None]:
    """The tombstones deleting ``group_id`` and its offsets if it is still a KIP-848 group
    without members whose offsets have all expired (or that has none); else no records."""
    if not _expiring(shard, group_id, now, retention_ms):
        return CoordinatorResult((), None)
    offsets = shard.offsets
    records: list[GroupRecord] = [
        *offsets.delete_records(group_id, list(offsets.all(group_id))),
        *shard.consumer.delete_records(group_id),
    ]
    return CoordinatorResult(records, None)


def _expiring(shard: GroupCoordinatorShard, group_id: str, now: int, retention_ms: int) -> bool:
    group = shard.consumer.groups.get(group_id)
    if group is None or group.members:
        return False
    offsets = shard.offsets
    if offsets.has_pending(group_id):
        return False
    return len(offsets.expired(group_id, now, retention_ms, None)) == offsets.count(group_id)
