"""ConsumerGroupCoordinator: the KIP-848 consumer group protocol, owned by the event loop.

Serves ConsumerGroupHeartbeat (join, heartbeat, leave), ConsumerGroupDescribe, and the
consumer-group side of OffsetCommit/OffsetFetch/ListGroups/DescribeGroups/DeleteGroups (the
classic :class:`~pydmq.groups.coordinator.GroupCoordinator` owns it and dispatches to it).

A heartbeat:

1. is validated like Kafka 4 (INVALID_REQUEST with Kafka's messages for a bad first
   heartbeat, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, UNKNOWN_MEMBER_ID,
   FENCED_MEMBER_EPOCH for an epoch that is neither the member's nor its previous one with a
   subset of its partitions, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
   GROUP_MAX_SIZE_REACHED at ``group.consumer.max.size``);
2. updates the member (fields not sent are unchanged); a new member, a changed subscription,
   or changed metadata of the subscribed topics (created, deleted, more partitions: compared
   with the stored topic ids and partition counts) bumps the group epoch;
3. recomputes the target assignment with the group's assignor when the group epoch is ahead
   (the assignor most members name in ``server_assignor``, else the first of
   ``group.consumer.assignors``);
4. reconciles the member (:func:`~pydmq.groups.consumer.group.reconcile`) and answers its
   epoch, the heartbeat interval, and its full assignment when it changed, when the member
   (re)joins, or when the request is a full one (rebalance timeout, subscription and owned
   partitions all sent); otherwise the assignment is null.

Epoch -1 leaves (the member is removed; its partitions are free at once); -2 is a static
member's temporary leave: its assignment is kept for its instance id until the session
timeout, and a new member id joining with that instance id takes it over without a
rebalance. Every member has a session timer (``group.consumer.session.timeout.ms``, reset by
each heartbeat) and, while it has partitions to revoke, a rebalance timer (its
``rebalance_timeout``): either firing removes it from the group. Both are timers of the
group's ``__consumer_offsets`` shard (:class:`~pydmq.coordinator.timer.CoordinatorTimer`): they
fire through the shard's event queue and are dropped with it when the partition is unloaded.

Subscribed regular expressions have Kafka's RE2/J syntax and semantics
(:mod:`pydmq.groups.consumer.topic_regex`: what RE2/J refuses is INVALID_REGULAR_EXPRESSION
with its error description; matching is a full match in linear time) and are resolved
against every topic, internal ones included, as Kafka does.

Every change is written to ``__consumer_offsets`` (records in
:mod:`pydmq.groups.consumer.records`) before it is visible; :meth:`replay` rebuilds the
groups, members, target and current assignments at start-up.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydmq.assignment.api import (
    AssignmentSpec,
    GroupAssignorSpec,
    InvalidAssignmentError,
    MemberSubscription,
    TopicMetadata,
    validate_assignment,
)
from pydmq.coordinator.timer import CoordinatorTimer, TimerKey, run_callback
from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.group import (
    ConsumerGroup,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    Partitions,
    Reconciled,
    freeze,
    reconcile,
)
from pydmq.groups.consumer.topic_regex import RegexSyntaxError, compile_topic_regex
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerGroupLoad",
    "HeartbeatRequest",
    "HeartbeatResult",
    "TopicLike",
    "TopicView",
]

log = logging.getLogger(__name__)

_LEAVE = -1
_STATIC_LEAVE = -2
_PROTOCOL_TYPE = "consumer"


class TopicLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> Sequence[object]: ...


class TopicView(Protocol):
    """The broker's topic registry as the coordinator reads it."""

    def get(self, name: str) -> TopicLike | None: ...

    def by_id(self, topic_id: uuid.UUID) -> TopicLike | None: ...

    def __iter__(self) -> Iterator[TopicLike]: ...


class _NoTopics:
    def get(self, name: str) -> TopicLike | None:
        return None

    def by_id(self, topic_id: uuid.UUID) -> TopicLike | None:
        return None

    def __iter__(self) -> Iterator[TopicLike]:
        return iter(())


Appender = Callable[[str, Sequence[tuple[bytes, bytes | None]]], object]  # its result is unused


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Mapping[uuid.UUID, Iterable[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


@dataclass(slots=True)
class _Loaded:
    epoch: int | None = None
    metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    assignment_epoch: int = 0
    members: dict[str, rec.MemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    current: dict[str, rec.CurrentMemberValue] = field(default_factory=dict)


ConsumerGroupLoad = dict[str, _Loaded]
"""Consumer-group records of one ``__consumer_offsets`` load, by group id."""


def _error(code: int, message: str | None = None) -> HeartbeatResult:
    return HeartbeatResult(code, message)


class ConsumerGroupCoordinator:
    """KIP-848 consumer groups of this node. Event-loop owned, no locks."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        append: Appender,
        delete_offsets: Callable[[str], None],
        assignors: Mapping[str, GroupAssignorSpec],
        topics: TopicView | None = None,
        *,
        timer_for: Callable[[str], CoordinatorTimer[Any] | None],
    ) -> None:
        self.config = config
        self._timer_for = timer_for
        self._append = append
        self._delete_offsets = delete_offsets
        self.assignors = dict(assignors)
        self.topics: TopicView = topics if topics is not None else _NoTopics()
        self.groups: dict[str, ConsumerGroup] = {}
        default = next((a for a in config.assignors if a in self.assignors), None)
        self.default_assignor = default or next(iter(self.assignors), "")

    # -- lifecycle -------------------------------------------------------------------
    def replay(self, key_bytes: bytes, value: bytes | None, into: ConsumerGroupLoad) -> None:
        """One ``__consumer_offsets`` record with a consumer-group key, into ``into`` (the
        load of its partition)."""
        key = rec.decode_consumer_key(key_bytes)
        loaded = into.setdefault(key.group, _Loaded())
        member = key.member or ""
        match key.kind:
            case rec.GROUP_METADATA:
                if value is None:
                    into[key.group] = _Loaded()
                else:
                    loaded.epoch = rec.decode_epoch(value)
            case rec.PARTITION_METADATA:
                loaded.metadata = {} if value is None else rec.decode_partition_metadata(value)
            case rec.MEMBER_METADATA:
                if value is None:
                    loaded.members.pop(member, None)
                else:
                    loaded.members[member] = rec.decode_member_metadata(value)
            case rec.TARGET_METADATA:
                loaded.assignment_epoch = 0 if value is None else rec.decode_epoch(value)
            case rec.TARGET_MEMBER:
                if value is None:
                    loaded.targets.pop(member, None)
                else:
                    loaded.targets[member] = rec.decode_partitions(value)
            case rec.CURRENT_MEMBER:
                if value is None:
                    loaded.current.pop(member, None)
                else:
                    loaded.current[member] = rec.decode_current_member(value)

    def finish_load(self, load: ConsumerGroupLoad, *, start_timers: bool = False) -> list[str]:
        """Build the groups of a partition's finished load; with ``start_timers`` (a partition
        loaded while serving) their members' session timers start now, else :meth:`start`
        starts them. Returns the ids of the groups built."""
        built: list[str] = []
        for group_id, loaded in load.items():
            if loaded.epoch is None:
                continue
            group = ConsumerGroup(group_id)
            group.group_epoch = loaded.epoch
            group.assignment_epoch = loaded.assignment_epoch
            group.subscription_metadata = dict(loaded.metadata)
            for member_id, meta in loaded.members.items():
                member = ConsumerGroupMember(
                    member_id=member_id,
                    instance_id=meta.instance_id,
                    rack_id=meta.rack_id,
                    client_id=meta.client_id,
                    client_host=meta.client_host,
                    rebalance_timeout_ms=meta.rebalance_timeout_ms,
                    subscribed_topic_names=meta.subscribed_topic_names,
                    subscribed_topic_regex=meta.subscribed_topic_regex,
                    server_assignor=meta.server_assignor,
                )
                if meta.subscribed_topic_regex:
                    try:
                        member.compiled_regex = compile_topic_regex(meta.subscribed_topic_regex)
                    except RegexSyntaxError:
                        member.compiled_regex = None
                current = loaded.current.get(member_id)
                if current is not None:
                    member.member_epoch = current.member_epoch
                    member.previous_member_epoch = current.previous_member_epoch
                    member.state = MemberState(current.state)
                    member.left_static = current.left_static
                    member.assigned = freeze(current.assigned)
                    member.pending_revocation = freeze(current.pending_revocation)
                try:
                    group.add_member(member)
                except AssertionError:
                    log.warning(
                        "group %s: dropping conflicting assignment of %s", group_id, member_id
                    )
                    group.remove_member(member_id)
                    member.assigned, member.pending_revocation = {}, {}
                    member.member_epoch, member.state = 0, MemberState.STABLE
                    group.add_member(member)
                group.target[member_id] = freeze(loaded.targets.get(member_id, {}))
            self.groups[group_id] = group
            built.append(group_id)
            if start_timers:
                for member in group.members.values():
                    self._schedule_session(group, member)
        if built:
            log.info("loaded %d consumer groups", len(built))
        load.clear()
        return built

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> list[str]:
        """Forget the groups ``owned_elsewhere`` selects (their ``__consumer_offsets``
        partition is led elsewhere now): timers cancelled, nothing written."""
        doomed = [g for g in self.groups if owned_elsewhere(g)]
        for group_id in doomed:
            group = self.groups.pop(group_id)
            for member in group.members.values():
                self._cancel_timers(group, member)
            group.dead = True
        return doomed

    def start(self) -> None:
        """Start the session timers of the members loaded at start-up (needs the loop)."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session(group, member)

    def stop(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self._cancel_timers(group, member)

    # -- heartbeat -------------------------------------------------------------------
    def heartbeat(
        self, req: HeartbeatRequest, classic_guard: Callable[[str], int] | None = None
    ) -> HeartbeatResult:
        """Serve one ConsumerGroupHeartbeat. ``classic_guard(group_id)`` is asked before a
        member joins a group id that is not a consumer group (a classic group with members
        answers an error code; an empty one is converted)."""
        invalid = self._validate(req)
        if invalid is not None:
            return invalid
        group = self.groups.get(req.group_id)
        if req.member_epoch in (_LEAVE, _STATIC_LEAVE):
            return self._leave(group, req)
        if req.member_epoch == 0:
            return self._join(group, req, classic_guard)
        if group is None:
            return _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if member is None or member.left_static:
            return _error(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return _error(ErrorCode.FENCED_INSTANCE_ID)
        owned = None if req.topic_partitions is None else freeze(req.topic_partitions)
        if req.member_epoch != member.member_epoch:
            lost_response = (
                req.member_epoch == member.previous_member_epoch
                and owned is not None
                and all(ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())
            )
            if req.member_epoch > member.member_epoch or not lost_response:
                return _error(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The member epoch {req.member_epoch} does not match the expected "
                    f"epoch {member.member_epoch}.",
                )
        return self._update_and_reconcile(group, member, req, owned, joined=False)

    def _validate(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        def bad(message: str) -> HeartbeatResult:
            return _error(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            return bad("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            return bad("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            return bad("RackId can't be empty.")
        if req.member_epoch < _STATIC_LEAVE:
            return bad("MemberEpoch is invalid.")
        if (req.member_epoch != 0 or req.api_version >= 1) and not req.member_id:
            return bad("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or any(req.topic_partitions.values()):
                return bad("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                return bad(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        if req.member_epoch == _STATIC_LEAVE and req.instance_id is None:
            return bad("InstanceId can't be null.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            return _error(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"Assignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
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

    def _join(
        self,
        group: ConsumerGroup | None,
        req: HeartbeatRequest,
        classic_guard: Callable[[str], int] | None,
    ) -> HeartbeatResult:
        member_id = req.member_id or str(uuid.uuid4())
        if group is None:
            if classic_guard is not None:
                error = classic_guard(req.group_id)
                if error:
                    return _error(error, f"Group {req.group_id} is not a consumer group.")
            group = ConsumerGroup(req.group_id)
            self.groups[req.group_id] = group
        member = group.members.get(member_id)
        if req.instance_id is not None:
            existing_id = group.static_members.get(req.instance_id)
            if existing_id is not None and existing_id != member_id:
                existing = group.members[existing_id]
                if not existing.left_static:
                    return self._forget_if_unused(
                        group,
                        _error(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {existing_id} with instance id {req.instance_id} "
                            "is not released yet.",
                        ),
                    )
                member = self._replace_static_member(group, existing, member_id)
        if member is None:
            if len(group.members) >= self.config.max_size:
                return self._forget_if_unused(
                    group,
                    _error(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.config.max_size} members.",
                    ),
                )
            member = ConsumerGroupMember(member_id=member_id, instance_id=req.instance_id)
            group.add_member(member)
            log.info("member %s joins consumer group %s", member_id, group.group_id)
            return self._update_and_reconcile(group, member, req, {}, joined=True, new=True)
        if not member.left_static and (member.assigned or member.pending_revocation):
            # the member rejoins (after being fenced): it released everything it held
            group.update_assignment(member, Reconciled(0, -1, MemberState.STABLE, {}, {}))
        member.left_static = False
        return self._update_and_reconcile(group, member, req, {}, joined=True)

    def _forget_if_unused(self, group: ConsumerGroup, result: HeartbeatResult) -> HeartbeatResult:
        if not group.members and group.group_epoch == 0:
            self.groups.pop(group.group_id, None)
        return result

    def _replace_static_member(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new_id: str
    ) -> ConsumerGroupMember:
        target = group.target.get(old.member_id, {})
        self._cancel_timers(group, old)
        group.remove_member(old.member_id)
        self._write(group, self._member_tombstones(group.group_id, old.member_id))
        member = ConsumerGroupMember(
            member_id=new_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex,
            server_assignor=old.server_assignor,
            member_epoch=old.member_epoch,
            previous_member_epoch=old.previous_member_epoch,
            state=old.state,
            assigned=old.assigned,
            pending_revocation=old.pending_revocation,
            compiled_regex=old.compiled_regex,
        )
        group.add_member(member)
        group.target[new_id] = target
        self._write(
            group,
            [
                self._member_metadata_record(group.group_id, member),
                self._target_record(group.group_id, new_id, target),
                self._current_record(group.group_id, member),
            ],
        )
        log.info(
            "static member %s (instance %s) replaces %s in group %s",
            new_id,
            member.instance_id,
            old.member_id,
            group.group_id,
        )
        return member

    def _update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        req: HeartbeatRequest,
        owned: Partitions | None,
        *,
        joined: bool,
        new: bool = False,
    ) -> HeartbeatResult:
        records: list[tuple[bytes, bytes | None]] = []
        changed_subscription = new
        changed_metadata = new
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                changed_subscription = changed_metadata = True
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                member.compiled_regex = compile_topic_regex(regex) if regex else None
                changed_subscription = changed_metadata = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed_subscription = changed_metadata = True
        for attr, value in (
            ("rack_id", req.rack_id),
            (
                "rebalance_timeout_ms",
                None if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
            ),
            ("client_id", req.client_id if joined else None),
            ("client_host", req.client_host if joined else None),
        ):
            if value is not None and getattr(member, attr) != value:
                setattr(member, attr, value)
                changed_metadata = True
        if changed_metadata:
            records.append(self._member_metadata_record(group.group_id, member))
        bump = changed_subscription
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append(
                (
                    rec.ConsumerGroupKey(rec.PARTITION_METADATA, group.group_id).encode(),
                    rec.encode_partition_metadata(metadata),
                )
            )
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(self._epoch_record(group))
            log.info(
                "consumer group %s: epoch %d (%s)",
                group.group_id,
                group.group_epoch,
                "new member" if new else "subscription or metadata changed",
            )
        self._write(group, records)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        before = member.assigned
        self._reconcile(group, member, owned)
        self._schedule_session(group, member)
        full = joined or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member.member_id,
            member.member_epoch,
            self.config.heartbeat_interval_ms,
            dict(member.assigned) if full or member.assigned != before else None,
        )

    def _reconcile(
        self, group: ConsumerGroup, member: ConsumerGroupMember, owned: Partitions | None
    ) -> None:
        nxt = reconcile(
            member,
            group.assignment_epoch,
            group.target.get(member.member_id, {}),
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
            group.update_assignment(member, nxt)
            self._write(group, [self._current_record(group.group_id, member)])
            if member.state is MemberState.UNREVOKED_PARTITIONS and (
                not was_revoking or old_pending != member.pending_revocation
            ):
                self._schedule_rebalance(group, member)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel(group.group_id, member.rebalance_timer)
            member.rebalance_timer = None

    # -- leave / expiry --------------------------------------------------------------
    def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> HeartbeatResult:
        member = None if group is None else group.members.get(req.member_id)
        if group is None or member is None:
            return _error(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.instance_id is not None and member.instance_id != req.instance_id:
            return _error(ErrorCode.FENCED_INSTANCE_ID)
        if req.member_epoch == _STATIC_LEAVE:
            member.left_static = True
            self._cancel(group.group_id, member.rebalance_timer)
            member.rebalance_timer = None
            self._write(group, [self._current_record(group.group_id, member)])
            self._schedule_session(group, member)
            log.info(
                "static member %s leaves group %s temporarily", member.member_id, group.group_id
            )
            return HeartbeatResult(ErrorCode.NONE, None, member.member_id, _STATIC_LEAVE)
        log.info("member %s leaves consumer group %s", member.member_id, group.group_id)
        self._remove_member(group, member)
        return HeartbeatResult(ErrorCode.NONE, None, member.member_id, _LEAVE)

    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        records = self._member_tombstones(group.group_id, member.member_id)
        self._cancel_timers(group, member)
        group.remove_member(member.member_id)
        group.group_epoch += 1
        records.append(self._epoch_record(group))
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append(
                (
                    rec.ConsumerGroupKey(rec.PARTITION_METADATA, group.group_id).encode(),
                    rec.encode_partition_metadata(metadata),
                )
            )
        self._write(group, records)
        self._compute_target(group)

    # -- timers of the group's shard ------------------------------------------------------
    def _schedule_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = ("consumer-session", group.group_id, member.member_id)
        self._cancel(group.group_id, member.session_timer)
        member.session_timer = key
        timer = self._timer_for(group.group_id)
        if timer is not None:
            operation = run_callback(self._expire_session, group, member)
            timer.schedule(key, self.config.session_timeout_ms, operation)

    def _schedule_rebalance(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = ("consumer-rebalance", group.group_id, member.member_id)
        self._cancel(group.group_id, member.rebalance_timer)
        member.rebalance_timer = key
        timer = self._timer_for(group.group_id)
        if timer is not None:
            operation = run_callback(self._expire_rebalance, group, member, member.member_epoch)
            timer.schedule(key, member.rebalance_timeout_ms, operation)

    def _cancel(self, group_id: str, key: TimerKey | None) -> None:
        """Cancel the timer ``key`` of the group's shard (gone with an unloaded shard)."""
        if key is None:
            return
        timer = self._timer_for(group_id)
        if timer is not None:
            timer.cancel(key)

    def _cancel_timers(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self._cancel(group.group_id, member.session_timer)
        self._cancel(group.group_id, member.rebalance_timer)
        member.session_timer = None
        member.rebalance_timer = None

    def _expire_session(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        member.session_timer = None
        if (
            group.members.get(member.member_id) is not member
            or self.groups.get(group.group_id) is not group
        ):
            return
        log.info(
            "member %s of consumer group %s expired (session timeout %d ms)",
            member.member_id,
            group.group_id,
            self.config.session_timeout_ms,
        )
        self._safely(self._remove_member, group, member)

    def _expire_rebalance(
        self, group: ConsumerGroup, member: ConsumerGroupMember, epoch: int
    ) -> None:
        member.rebalance_timer = None
        if (
            group.members.get(member.member_id) is not member
            or member.state is not MemberState.UNREVOKED_PARTITIONS
            or member.member_epoch != epoch
        ):
            return
        log.info(
            "member %s of consumer group %s did not revoke its partitions within %d ms",
            member.member_id,
            group.group_id,
            member.rebalance_timeout_ms,
        )
        self._safely(self._remove_member, group, member)

    @staticmethod
    def _safely(
        fn: Callable[[ConsumerGroup, ConsumerGroupMember], None],
        group: ConsumerGroup,
        member: ConsumerGroupMember,
    ) -> None:
        try:
            fn(group, member)
        except Exception:
            log.exception("consumer group %s: removing %s failed", group.group_id, member.member_id)

    # -- target assignment -----------------------------------------------------------
    def _subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        # As Kafka's coordinator, a regex is matched against every topic, internal ones
        # included: a member that names __consumer_offsets in its regex is assigned it.
        needs_all = any(m.compiled_regex is not None for m in group.members.values())
        all_names = [t.name for t in self.topics] if needs_all else []
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed_topic_names(all_names):
            info = self.topics.get(name)
            if info is not None:
                out[name] = (info.topic_id, len(info.partitions))
        return out

    def assignor_for(self, group: ConsumerGroup) -> str:
        votes = Counter(
            m.server_assignor
            for m in group.members.values()
            if m.server_assignor is not None and m.server_assignor in self.assignors
        )
        if not votes:
            return self.default_assignor
        order = list(self.assignors)
        return max(votes, key=lambda n: (votes[n], -order.index(n)))

    def _compute_target(self, group: ConsumerGroup) -> None:
        name = self.assignor_for(group)
        spec_assignor = self.assignors.get(name)
        topics = {
            tid: TopicMetadata(tid, topic, n)
            for topic, (tid, n) in group.subscription_metadata.items()
        }
        members = {
            m.member_id: MemberSubscription(
                m.member_id,
                m.instance_id,
                m.rack_id,
                frozenset(
                    tid
                    for topic, (tid, _) in group.subscription_metadata.items()
                    if m.subscribes_to(topic)
                ),
                group.target.get(m.member_id, {}),
            )
            for m in group.members.values()
        }
        spec = AssignmentSpec(members, topics)
        if spec_assignor is None:
            log.error("consumer group %s: no assignor available", group.group_id)
            return
        try:
            result = validate_assignment(spec, spec_assignor.assignor.assign(spec))
        except (InvalidAssignmentError, Exception):
            log.exception(
                "consumer group %s: assignor %s failed; keeping the previous target",
                group.group_id,
                name,
            )
            return
        records: list[tuple[bytes, bytes | None]] = []
        for member_id, parts in result.items():
            if group.target.get(member_id) != parts:
                records.append(self._target_record(group.group_id, member_id, parts))
        records.append(
            (
                rec.ConsumerGroupKey(rec.TARGET_METADATA, group.group_id).encode(),
                rec.encode_epoch(group.group_epoch),
            )
        )
        self._write(group, records)
        group.target = result
        group.assignment_epoch = group.group_epoch

    # -- records ---------------------------------------------------------------------
    def _write(self, group: ConsumerGroup, records: list[tuple[bytes, bytes | None]]) -> None:
        if records:
            self._append(group.group_id, records)

    @staticmethod
    def _epoch_record(group: ConsumerGroup) -> tuple[bytes, bytes | None]:
        return (
            rec.ConsumerGroupKey(rec.GROUP_METADATA, group.group_id).encode(),
            rec.encode_epoch(group.group_epoch),
        )

    @staticmethod
    def _member_metadata_record(
        group_id: str, m: ConsumerGroupMember
    ) -> tuple[bytes, bytes | None]:
        return (
            rec.ConsumerGroupKey(rec.MEMBER_METADATA, group_id, m.member_id).encode(),
            rec.encode_member_metadata(
                rec.MemberMetadataValue(
                    m.instance_id,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.subscribed_topic_names,
                    m.subscribed_topic_regex,
                    m.server_assignor,
                )
            ),
        )

    @staticmethod
    def _target_record(
        group_id: str, member_id: str, parts: Partitions
    ) -> tuple[bytes, bytes | None]:
        return (
            rec.ConsumerGroupKey(rec.TARGET_MEMBER, group_id, member_id).encode(),
            rec.encode_partitions(parts),
        )

    @staticmethod
    def _current_record(group_id: str, m: ConsumerGroupMember) -> tuple[bytes, bytes | None]:
        return (
            rec.ConsumerGroupKey(rec.CURRENT_MEMBER, group_id, m.member_id).encode(),
            rec.encode_current_member(
                rec.CurrentMemberValue(
                    m.member_epoch,
                    m.previous_member_epoch,
                    int(m.state),
                    m.left_static,
                    m.assigned,
                    m.pending_revocation,
                )
            ),
        )

    @staticmethod
    def _member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, bytes | None]]:
        return [
            (rec.ConsumerGroupKey(kind, group_id, member_id).encode(), None)
            for kind in (rec.CURRENT_MEMBER, rec.TARGET_MEMBER, rec.MEMBER_METADATA)
        ]

    # -- offsets ---------------------------------------------------------------------
    def validate_offset_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> int:
        """Kafka 4's rules for a commit to a consumer group (0 = accepted)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # admin client or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._validate_epoch(member, member_epoch)

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        group = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return self._validate_epoch(member, member_epoch)

    @staticmethod
    def _validate_epoch(member: ConsumerGroupMember, epoch: int) -> int:
        if epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def is_subscribed_to(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and any(m.subscribes_to(topic) for m in group.members.values())

    # -- admin -----------------------------------------------------------------------
    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        self._delete_offsets(group_id)
        self.drop_group(group_id)
        return ErrorCode.NONE

    def drop_group(self, group_id: str) -> None:
        """Forget an empty group (its records are tombstoned; committed offsets stay)."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member in list(group.members.values()):
            self._cancel_timers(group, member)
            group.remove_member(member.member_id)
        key = rec.ConsumerGroupKey
        self._append(
            group_id,
            [
                (key(rec.TARGET_METADATA, group_id).encode(), None),
                (key(rec.PARTITION_METADATA, group_id).encode(), None),
                (key(rec.GROUP_METADATA, group_id).encode(), None),
            ],
        )
        group.dead = True

    def topic_names(self, parts: Partitions) -> list[tuple[uuid.UUID, str, list[int]]]:
        out = []
        for topic_id, ps in sorted(parts.items()):
            info = self.topics.by_id(topic_id)
            out.append((topic_id, "" if info is None else info.name, sorted(ps)))
        return out

    def list_rows(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every consumer group."""
        return [(g.group_id, _PROTOCOL_TYPE, g.state.value) for g in self.groups.values()]

    @staticmethod
    def is_empty(group: ConsumerGroup) -> bool:
        return group.state is ConsumerGroupState.EMPTY
