"""How KIP-848 consumer groups change: only by replaying their records (sans-IO).

:func:`replay` applies one :class:`~pydmq.groups.consumer.records.ConsumerGroupRecord` to the
groups of a shard. It runs for every record read when a ``__consumer_offsets`` partition loads
and for the records of this node's writes once they are committed: the same code, so a group
rebuilt at load equals the group the live operations built.

An operation computes its write on a :class:`GroupChange`: a copy of the group into which each
record is replayed as it is emitted (with :func:`apply`, the code above), so the rest of the
operation reads the group as its own records leave it. The shard's group is not touched: it
changes when the runtime replays the same records after the commit, and a write that fails
leaves it as it was.
"""

from __future__ import annotations

import logging
from typing import cast

from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    Reconciled,
)
from pydmq.groups.consumer.records import (
    ConsumerGroupRecord,
    CurrentMemberValue,
    MemberMetadataValue,
    SubscriptionMetadata,
)
from pydmq.groups.consumer.topic_regex import RegexSyntaxError, compile_topic_regex

__all__ = ["GroupChange", "apply", "replay"]

log = logging.getLogger(__name__)


def replay(groups: dict[str, ConsumerGroup], record: ConsumerGroupRecord) -> None:
    """Apply ``record`` to ``groups`` (by group id): a record of an unknown group creates it,
    a tombstone of an unknown group is ignored, the group's tombstone removes it."""
    group_id = record.key.group
    group = groups.get(group_id)
    if group is None:
        if record.value is None:
            return
        group = groups[group_id] = ConsumerGroup(group_id)
    if not apply(group, record):
        del groups[group_id]


def apply(group: ConsumerGroup, record: ConsumerGroupRecord) -> bool:
    """Apply ``record`` to ``group``; False when it deletes the group (then marked dead)."""
    value = record.value
    member_id = record.key.member or ""
    match record.key.kind:
        case rec.GROUP_METADATA:
            if value is None:
                group.dead = True
                return False
            group.group_epoch = cast(int, value)
        case rec.PARTITION_METADATA:
            group.subscription_metadata = dict(cast(SubscriptionMetadata, value or {}))
        case rec.MEMBER_METADATA:
            if value is None:
                group.remove_member(member_id)
            else:
                _update_member(group, member_id, cast(MemberMetadataValue, value))
        case rec.TARGET_METADATA:
            group.assignment_epoch = 0 if value is None else cast(int, value)
        case rec.TARGET_MEMBER:
            if value is None:
                group.target.pop(member_id, None)
            else:
                group.target[member_id] = cast(Partitions, value)
        case rec.CURRENT_MEMBER:
            _update_current(group, member_id, cast(CurrentMemberValue | None, value))
    return True


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    member = group.writable_member(member_id)
    if member is None:
        member = ConsumerGroupMember(member_id=member_id, instance_id=instance_id)
        group.add_member(member)
    return member


def _update_member(group: ConsumerGroup, member_id: str, meta: MemberMetadataValue) -> None:
    member = _member(group, member_id, meta.instance_id)
    if member.instance_id != meta.instance_id and meta.instance_id is not None:
        member.instance_id = meta.instance_id  # its current assignment was replayed first
        group.static_members[meta.instance_id] = member_id
    member.rack_id = meta.rack_id
    member.client_id = meta.client_id
    member.client_host = meta.client_host
    member.rebalance_timeout_ms = meta.rebalance_timeout_ms
    member.server_assignor = meta.server_assignor
    compiled = member.compiled_regex
    if meta.subscribed_topic_regex != member.subscribed_topic_regex:
        compiled = None
        if meta.subscribed_topic_regex:
            try:
                compiled = compile_topic_regex(meta.subscribed_topic_regex)
            except RegexSyntaxError:
                log.warning(
                    "group %s: member %s has an invalid regex %r",
                    group.group_id,
                    member_id,
                    meta.subscribed_topic_regex,
                )
    group.update_subscription(
        member, tuple(meta.subscribed_topic_names), meta.subscribed_topic_regex, compiled
    )


def _update_current(
    group: ConsumerGroup, member_id: str, current: CurrentMemberValue | None
) -> None:
    if current is None:
        member = group.writable_member(member_id)
        if member is not None:
            member.left_static = False
            group.update_assignment(member, Reconciled(0, -1, MemberState.STABLE, {}, {}))
        return
    member = _member(group, member_id, None)
    member.left_static = current.left_static
    applied = group.update_assignment(
        member,
        Reconciled(
            current.member_epoch,
            current.previous_member_epoch,
            MemberState(current.state),
            current.assigned,
            current.pending_revocation,
        ),
    )
    if not applied:
        log.warning(
            "group %s: dropping the assignment of %s, which holds partitions of another member",
            group.group_id,
            member_id,
        )


class GroupChange:
    """A write of one group being computed: the records emitted so far and the group as they
    leave it. The first record copies the shard's group (or starts a new one) and every record
    is replayed into the copy at once; until then :attr:`group` is the shard's own group, to
    read only. Owned by the operation that computes it, on the shard's event queue."""

    __slots__ = ("_committed", "_copy", "group_id", "records")

    def __init__(self, group_id: str, committed: ConsumerGroup | None) -> None:
        self.group_id = group_id
        self._committed = committed
        self._copy: ConsumerGroup | None = None
        self.records: list[ConsumerGroupRecord] = []

    @property
    def group(self) -> ConsumerGroup:
        """The group as the records emitted so far leave it (read it again after an emit)."""
        if self._copy is None and self._committed is not None:
            return self._committed
        return self._writable()

    def emit(self, record: ConsumerGroupRecord) -> None:
        self.records.append(record)
        apply(self._writable(), record)

    def _writable(self) -> ConsumerGroup:
        if self._copy is None:
            committed = self._committed
            self._copy = ConsumerGroup(self.group_id) if committed is None else committed.copy()
        return self._copy
