"""Offsets retention of one ``__consumer_offsets`` shard, as a write (sans-IO).

Kafka 4's rules: committed offsets of a group expire ``offsets.retention.minutes`` after the
group became Empty (a classic group with a protocol type), else (simple consumers, KIP-848
groups without members) after their commit (or their explicit expiry); only groups without
members lose offsets. An Empty classic group left without offsets is then deleted (by the
replay of its tombstone). Run by the shard's retention timer and by
``GroupCoordinator.expire_offsets``.
"""

from __future__ import annotations

from pydmq.coordinator.api import CoordinatorResult
from pydmq.groups.classic.group import GroupState
from pydmq.groups.records import GroupMetadataRecord
from pydmq.groups.shard import GroupCoordinatorShard, GroupRecord

__all__ = ["expire"]


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
