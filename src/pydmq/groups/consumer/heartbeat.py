"""ConsumerGroupHeartbeat as an operation: the records it writes and its answer (sans-IO).

A heartbeat:

1. is validated like Kafka 4 (:func:`validate`: INVALID_REQUEST with Kafka's messages for a
   bad first heartbeat, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION; then, on the group,
   UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH for an epoch that is neither the member's nor its
   previous one with a subset of its partitions, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
   GROUP_MAX_SIZE_REACHED at ``group.consumer.max.size``);
2. updates the member (fields not sent are unchanged); a new member, a changed subscription,
   or changed metadata of the subscribed topics (created, deleted, more partitions: compared
   with the stored topic ids and partition counts) bumps the group epoch;
3. recomputes the target assignment (:mod:`pydmq.groups.consumer.target`) when the group
   epoch is ahead;
4. reconciles the member (:func:`~pydmq.groups.consumer.group.reconcile`) and answers its
   epoch, the heartbeat interval, and its full assignment when it changed, when the member
   (re)joins, or when the request is a full one (rebalance timeout, subscription and owned
   partitions all sent); otherwise the assignment is null.

Epoch -1 leaves (the member is removed; its partitions are free at once); -2 is a static
member's temporary leave: its assignment is kept for its instance id until the session
timeout, and a new member id joining with that instance id takes it over without a
rebalance.

Every step emits records into a :class:`~pydmq.groups.consumer.replay.GroupChange` (a copy of
the group, into which each record is replayed at once); the shard's group changes only when
the records are replayed after their commit. Timers (:class:`MemberTimers`) are set as the
operation runs, as Kafka's are (an expiry checks the committed group it finds, so one set by
a write that failed does nothing); they are cancelled only when the records that end them are
replayed (a member removed, its revocation done), so a failed write leaves every timer of the
committed group running.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.api import ConsumerGroupServices, HeartbeatRequest, HeartbeatResult
from pydmq.groups.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    Partitions,
    freeze,
    reconcile,
)
from pydmq.groups.consumer.records import CurrentMemberValue, MemberMetadataValue
from pydmq.groups.consumer.replay import GroupChange
from pydmq.groups.consumer.target import compute_target, subscription_metadata
from pydmq.groups.consumer.topic_regex import RegexSyntaxError, compile_topic_regex
from pydmq.protocol.errors import ErrorCode

__all__ = ["ClassicGuard", "MemberTimers", "heartbeat", "remove_member", "validate"]

log = logging.getLogger(__name__)

LEAVE = -1
STATIC_LEAVE = -2

ClassicGuard = Callable[[str], int]
"""Asked before a member joins a group id that is not a consumer group: an error code for a
classic group with members; NONE once an empty one is converted."""


class MemberTimers(Protocol):
    """The session and rebalance timers of the members, in the group's shard."""

    def schedule_session(self, group_id: str, member_id: str) -> None: ...

    def schedule_rebalance(
        self, group_id: str, member_id: str, member_epoch: int, timeout_ms: int
    ) -> None: ...


def _error(code: int, message: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(code, message)


def validate(services: ConsumerGroupServices, req: HeartbeatRequest) -> HeartbeatResult | None:
    """The answer to a malformed request; None when it is well formed."""

    def bad(message: str) -> HeartbeatResult:
        return _error(ErrorCode.INVALID_REQUEST, message)

    if not req.group_id:
        return bad("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        return bad("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        return bad("RackId can't be empty.")
    if req.member_epoch < STATIC_LEAVE:
        return bad("MemberEpoch is invalid.")
    if (req.member_epoch != 0 or req.api_version >= 1) and not req.member_id:
        return bad("MemberId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return bad("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or any(req.topic_partitions.values()):
            return bad("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    if req.member_epoch == STATIC_LEAVE and req.instance_id is None:
        return bad("InstanceId can't be null.")
    if req.server_assignor is not None and req.server_assignor not in services.assignors:
        return _error(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"Assignor {req.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(services.assignors)}.",
        )
    if req.subscribed_topic_regex:
        try:
            compile_topic_regex(req.subscribed_topic_regex)
        except RegexSyntaxError as exc:
            return _error(
                ErrorCode.INVALID_REGULAR_EXPRESSION,
                f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                f"regular expression: {exc}.",
            )
    return None


def heartbeat(
    services: ConsumerGroupServices,
    timers: MemberTimers,
    committed: ConsumerGroup | None,
    req: HeartbeatRequest,
    classic_guard: ClassicGuard,
) -> tuple[GroupChange, HeartbeatResult]:
    """Serve one validated heartbeat on ``committed`` (the shard's group, None when there is
    none): the change to write and the answer to give once it is committed."""
    change = GroupChange(req.group_id, committed)
    if req.member_epoch in (LEAVE, STATIC_LEAVE):
        return change, _leave(services, timers, change, committed, req)
    if req.member_epoch == 0:
        return change, _join(services, timers, change, committed, req, classic_guard)
    if committed is None:
        return change, _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
    member = committed.members.get(req.member_id)
    if member is None or member.left_static:
        return change, _error(
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"Member {req.member_id} is not a member of group {req.group_id}.",
        )
    if req.instance_id is not None and member.instance_id != req.instance_id:
        return change, _error(ErrorCode.FENCED_INSTANCE_ID)
    owned = None if req.topic_partitions is None else freeze(req.topic_partitions)
    if req.member_epoch != member.member_epoch:
        lost_response = (
            req.member_epoch == member.previous_member_epoch
            and owned is not None
            and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
        )
        if req.member_epoch > member.member_epoch or not lost_response:
            return change, _error(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The member epoch {req.member_epoch} does not match the expected "
                f"epoch {member.member_epoch}.",
            )
    result = _update_and_reconcile(services, timers, change, req.member_id, req, owned, False)
    return change, result


def _join(
    services: ConsumerGroupServices,
    timers: MemberTimers,
    change: GroupChange,
    committed: ConsumerGroup | None,
    req: HeartbeatRequest,
    classic_guard: ClassicGuard,
) -> HeartbeatResult:
    member_id = req.member_id or str(uuid.uuid4())
    group = change.group
    if committed is None:
        error = classic_guard(req.group_id)
        if error:
            return _error(error, f"Group {req.group_id} is not a consumer group.")
    member = group.members.get(member_id)
    if req.instance_id is not None:
        existing_id = group.static_members.get(req.instance_id)
        if existing_id is not None and existing_id != member_id:
            existing = group.members[existing_id]
            if not existing.left_static:
                return _error(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {existing_id} with instance id {req.instance_id} "
                    "is not released yet.",
                )
            _replace_static_member(timers, change, existing, member_id)
            member = change.group.members[member_id]
    if member is None:
        if len(group.members) >= services.config.max_size:
            return _error(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{services.config.max_size} members.",
            )
        log.info("member %s joins consumer group %s", member_id, group.group_id)
        return _update_and_reconcile(services, timers, change, member_id, req, {}, True, True)
    if member.left_static or member.assigned or member.pending_revocation:
        # the member rejoins (after being fenced): it released everything it held
        held = not member.left_static and (member.assigned or member.pending_revocation)
        change.emit(
            rec.current_member_record(
                group.group_id,
                member_id,
                CurrentMemberValue(
                    0 if held else member.member_epoch,
                    -1 if held else member.previous_member_epoch,
                    int(MemberState.STABLE if held else member.state),
                    False,
                    {} if held else member.assigned,
                    {} if held else member.pending_revocation,
                ),
            )
        )
    return _update_and_reconcile(services, timers, change, member_id, req, {}, True)


def _replace_static_member(
    timers: MemberTimers, change: GroupChange, old: ConsumerGroupMember, new_id: str
) -> None:
    group = change.group
    group_id = group.group_id
    target = group.target.get(old.member_id, {})
    for record in _member_tombstones(group_id, old.member_id):
        change.emit(record)
    # The old member under the new id and no longer left; only its records are written.
    new = dataclasses.replace(old, member_id=new_id, left_static=False, compiled_regex=None)
    change.emit(rec.member_metadata_record(group_id, new_id, _metadata(new)))
    change.emit(rec.target_member_record(group_id, new_id, target))
    change.emit(rec.current_member_record(group_id, new_id, _current(new)))
    log.info(
        "static member %s (instance %s) replaces %s in group %s",
        new_id,
        new.instance_id,
        old.member_id,
        group_id,
    )


def _update_and_reconcile(
    services: ConsumerGroupServices,
    timers: MemberTimers,
    change: GroupChange,
    member_id: str,
    req: HeartbeatRequest,
    owned: Partitions | None,
    joined: bool,
    new: bool = False,
) -> HeartbeatResult:
    group_id = change.group_id
    base = change.group.members.get(member_id) or ConsumerGroupMember(
        member_id=member_id, instance_id=req.instance_id
    )
    changed_subscription = new
    if joined or _may_change_metadata(req):
        wanted = _requested(base, req, joined)
        changed_subscription = new or (
            (wanted.subscribed_topic_names, wanted.subscribed_topic_regex, wanted.server_assignor)
            != (base.subscribed_topic_names, base.subscribed_topic_regex, base.server_assignor)
        )
        if new or wanted != _metadata(base):
            change.emit(rec.member_metadata_record(group_id, member_id, wanted))
    bump = changed_subscription
    metadata = subscription_metadata(services, change.group)
    if metadata != change.group.subscription_metadata:
        change.emit(rec.partition_metadata_record(group_id, metadata))
        bump = True
    if bump:
        change.emit(rec.group_epoch_record(group_id, change.group.group_epoch + 1))
        log.info(
            "consumer group %s: epoch %d (%s)",
            group_id,
            change.group.group_epoch,
            "new member" if new else "subscription or metadata changed",
        )
    if change.group.group_epoch > change.group.assignment_epoch:
        compute_target(services, change)
    before = change.group.members[member_id].assigned
    _reconcile(timers, change, member_id, owned)
    timers.schedule_session(group_id, member_id)
    member = change.group.members[member_id]
    full = joined or (
        req.rebalance_timeout_ms != -1
        and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
        and req.topic_partitions is not None
    )
    return HeartbeatResult(
        ErrorCode.NONE,
        None,
        member_id,
        member.member_epoch,
        services.config.heartbeat_interval_ms,
        dict(member.assigned) if full or member.assigned != before else None,
    )


def _may_change_metadata(req: HeartbeatRequest) -> bool:
    """Whether a heartbeat (not a join) sends any field of the member's metadata."""
    return (
        req.subscribed_topic_names is not None
        or req.subscribed_topic_regex is not None
        or req.server_assignor is not None
        or req.rack_id is not None
        or req.rebalance_timeout_ms != -1
    )


def _requested(
    member: ConsumerGroupMember, req: HeartbeatRequest, joined: bool
) -> MemberMetadataValue:
    """The member's metadata with what the request sends (what it leaves out is kept)."""
    names = member.subscribed_topic_names
    if req.subscribed_topic_names is not None:
        names = tuple(sorted(set(req.subscribed_topic_names)))
    regex = member.subscribed_topic_regex
    if req.subscribed_topic_regex is not None:
        regex = req.subscribed_topic_regex or None
    return MemberMetadataValue(
        member.instance_id,
        member.rack_id if req.rack_id is None else req.rack_id,
        req.client_id if joined else member.client_id,
        req.client_host if joined else member.client_host,
        member.rebalance_timeout_ms if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
        names,
        regex,
        member.server_assignor if req.server_assignor is None else req.server_assignor,
    )


def _reconcile(
    timers: MemberTimers, change: GroupChange, member_id: str, owned: Partitions | None
) -> None:
    group = change.group
    member = group.members[member_id]
    nxt = reconcile(
        member,
        group.assignment_epoch,
        group.target.get(member_id, {}),
        owned,
        group.owner_of,
    )
    was_revoking = member.state is MemberState.UNREVOKED_PARTITIONS
    if (
        nxt.member_epoch != member.member_epoch
        or nxt.previous_member_epoch != member.previous_member_epoch
        or nxt.state is not member.state
        or nxt.assigned != member.assigned
        or nxt.pending_revocation != member.pending_revocation
    ):
        old_pending = member.pending_revocation
        value = CurrentMemberValue(
            nxt.member_epoch,
            nxt.previous_member_epoch,
            int(nxt.state),
            member.left_static,
            nxt.assigned,
            nxt.pending_revocation,
        )
        change.emit(rec.current_member_record(group.group_id, member_id, value))
        member = change.group.members[member_id]
        if member.state is MemberState.UNREVOKED_PARTITIONS and (
            not was_revoking or old_pending != member.pending_revocation
        ):
            timers.schedule_rebalance(
                group.group_id, member_id, member.member_epoch, member.rebalance_timeout_ms
            )


def _leave(
    services: ConsumerGroupServices,
    timers: MemberTimers,
    change: GroupChange,
    committed: ConsumerGroup | None,
    req: HeartbeatRequest,
) -> HeartbeatResult:
    member = None if committed is None else committed.members.get(req.member_id)
    if member is None:
        return _error(
            ErrorCode.UNKNOWN_MEMBER_ID,
            f"Member {req.member_id} is not a member of group {req.group_id}.",
        )
    if req.instance_id is not None and member.instance_id != req.instance_id:
        return _error(ErrorCode.FENCED_INSTANCE_ID)
    group_id = req.group_id
    if req.member_epoch == STATIC_LEAVE:
        value = _current(member)
        change.emit(
            rec.current_member_record(
                group_id,
                member.member_id,
                CurrentMemberValue(
                    value.member_epoch,
                    value.previous_member_epoch,
                    value.state,
                    True,
                    value.assigned,
                    value.pending_revocation,
                ),
            )
        )
        timers.schedule_session(group_id, member.member_id)
        log.info("static member %s leaves group %s temporarily", member.member_id, group_id)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, STATIC_LEAVE)
    log.info("member %s leaves consumer group %s", member.member_id, group_id)
    remove_member(services, timers, change, member.member_id)
    return HeartbeatResult(ErrorCode.NONE, None, member.member_id, LEAVE)


def remove_member(
    services: ConsumerGroupServices, timers: MemberTimers, change: GroupChange, member_id: str
) -> None:
    """Emit the removal of a member (a leave, or an expired session or rebalance): its
    tombstones, the next group epoch, the subscription metadata if it changed, the target."""
    group_id = change.group_id
    for record in _member_tombstones(group_id, member_id):
        change.emit(record)
    change.emit(rec.group_epoch_record(group_id, change.group.group_epoch + 1))
    metadata = subscription_metadata(services, change.group)
    if metadata != change.group.subscription_metadata:
        change.emit(rec.partition_metadata_record(group_id, metadata))
    compute_target(services, change)


def _member_tombstones(group_id: str, member_id: str) -> list[rec.ConsumerGroupRecord]:
    return [
        rec.current_member_record(group_id, member_id, None),
        rec.target_member_record(group_id, member_id, None),
        rec.member_metadata_record(group_id, member_id, None),
    ]


def _metadata(m: ConsumerGroupMember) -> MemberMetadataValue:
    return MemberMetadataValue(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        m.server_assignor,
    )


def _current(m: ConsumerGroupMember) -> CurrentMemberValue:
    return CurrentMemberValue(
        m.member_epoch,
        m.previous_member_epoch,
        int(m.state),
        m.left_static,
        m.assigned,
        m.pending_revocation,
    )
