"""ClassicGroupManager: the classic group protocol over the classic groups of this node.

Flows follow Kafka's classic coordinator:

- JoinGroup: a new member (empty member id) gets an id ``<client id>-<uuid>``; from JoinGroup
  v4 (``require_known_member_id``) it is first answered MEMBER_ID_REQUIRED and kept pending
  (expires after its session timeout); v0-v3 join in one round trip. A join (or a changed
  subscription, or the leader rejoining) moves the group to PreparingRebalance; the rebalance
  completes when every known member has rejoined or after the largest rebalance timeout
  (dynamic members that did not rejoin are removed). An Empty group's first rebalance waits
  ``group.initial.rebalance.delay.ms``, extended while members keep joining, up to the
  rebalance timeout. Completion bumps the generation, selects the protocol by votes and
  answers every pending join (the leader gets the members' metadata).
- SyncGroup: the leader's assignments are stored (``__consumer_offsets``) and handed to every
  member; the group becomes Stable. Members that do not sync within the rebalance timeout are
  removed and the group rebalances.
- Heartbeat/session timeout: every member has a timer of its shard, reset by heartbeats,
  syncs and commits; expiry removes the member and rebalances (members waiting in a join or
  sync are bounded by the rebalance timers instead).
- Static membership (``group.instance.id``, JoinGroup v5+): a known instance id joining with an
  empty member id replaces the old member id; in a Stable group whose selected protocol and
  subscribed topics do not change, no rebalance happens and the member gets its assignment back
  through SyncGroup. The replaced member id is answered FENCED_INSTANCE_ID.

The :class:`~pydmq.groups.coordinator.GroupCoordinator` hosts it (:class:`ClassicGroupHost`):
ownership of the group's ``__consumer_offsets`` partition, writes through the coordinator
runtime and the wait for their commit, committed offsets.

Timers (a member's session, a pending member's expiry, the join and initial-delay timer, the
sync timer) are timers of the group's shard (:class:`~pydmq.coordinator.timer.CoordinatorTimer`):
they fire through the shard's event queue and die with the shard when its partition is
unloaded. What a group's record holds changes by the replay of the record
(:meth:`ClassicGroupManager.replay`, at load and once this node's write is committed): the
members' assignments of a SyncGroup, a deletion; the rebalance's transient state (joins,
pending members, awaited futures, the generation bump until the sync record) changes in
place, as in Kafka's ClassicGroup. A load restores each group from its last record as Kafka
does: generation, protocol, leader and members with their subscriptions and assignments
(Stable, or Empty without members), and each member's session timer starts once loaded
(:meth:`ClassicGroupManager.start_timers`), so a group survives a failover or a restart
without a rebalance: its members' next heartbeats are accepted at the same generation.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Protocol

from pydmq.coordinator.api import CoordinatorError
from pydmq.coordinator.timer import CoordinatorTimer, TimerKey, run_callback
from pydmq.groups.api import CommitRequest, GroupConfig, GroupSummary, JoinRequest
from pydmq.groups.classic.group import (
    ClassicGroup,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
    subscribed_topics,
)
from pydmq.groups.errors import coordinator_error
from pydmq.groups.offsets import OffsetMetadataManager
from pydmq.groups.records import GroupMetadataRecord
from pydmq.protocol.errors import ErrorCode

__all__ = ["ClassicGroupHost", "ClassicGroupManager"]

log = logging.getLogger(__name__)


class ClassicGroupHost(Protocol):
    """What the classic protocol needs of the group coordinator hosting it: writes through
    the runtime and the wait for their commit."""

    @property
    def write_mark(self) -> int: ...

    def write_records(self, group_id: str, records: Sequence[GroupMetadataRecord]) -> None: ...

    def wrote_since(self, group_id: str, mark: int) -> bool: ...

    def await_writes(self, group_id: str, mark: int) -> Coroutine[Any, Any, int]: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...


class ClassicGroupManager:
    """The classic groups of one ``__consumer_offsets`` partition led here and their
    protocol; part of its :class:`~pydmq.groups.shard.GroupCoordinatorShard`, owned by the
    event loop. Requests reach it once the coordinator checked the group id and ownership."""

    def __init__(
        self,
        config: GroupConfig,
        clock: Callable[[], int],
        host: ClassicGroupHost,
        timer: CoordinatorTimer[Any],
        offsets: OffsetMetadataManager,
    ) -> None:
        self.config = config
        self._clock = clock
        self._host = host
        self._timer = timer
        self._offsets = offsets
        self.groups: dict[str, ClassicGroup] = {}
        self._loaded = False

    # -- lifecycle -------------------------------------------------------------------
    def replay(self, record: GroupMetadataRecord) -> None:
        """Apply a group's committed record. At load each record restores its group as
        Kafka's load does (:meth:`ClassicGroup.from_record`: members included, Stable or
        Empty) and a tombstone deletes it. Once loaded, the records replayed are this node's
        own writes, applied to the live group (:meth:`ClassicGroup.replay`; a group that is
        not here is restored as at load), and a tombstone deletes the group unless members
        joined it since it was written."""
        group = self.groups.get(record.group)
        if record.value is None:
            if group is None:
                return
            if self._loaded and (group.members or not group.is_in(GroupState.EMPTY)):
                return
            self.forget_pending_members(group)
            group.transition_to(GroupState.DEAD, self._clock())
            del self.groups[record.group]
            return
        if group is None or not self._loaded:
            self.groups[record.group] = ClassicGroup.from_record(
                record.group, record.value, self._clock()
            )
            return
        group.replay(record.value)

    def ensure_group(self, group_id: str) -> None:
        """A commit of ``group_id`` was replayed: the group exists (an Empty simple group
        when it did not, as Kafka's replay of an offset commit creates it)."""
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id, self._clock())

    def finish_load(self, with_offsets: Iterable[str], consumer: Callable[[str], bool]) -> int:
        """The partition is loaded: groups with committed offsets but no record are Empty
        groups too, and a group id that is a consumer group is not also a classic one.
        Returns how many classic groups there are."""
        now = self._clock()
        for group_id in with_offsets:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, now)
        for group_id in [g for g in self.groups if consumer(g)]:
            del self.groups[group_id]
        self._loaded = True
        return len(self.groups)

    def start_timers(self) -> None:
        """Start the session timer of every member the load restored (needs the loop), as
        Kafka does once a partition is loaded: a member that does not heartbeat within its
        session timeout is removed and its group rebalances. A group loaded with more members
        than ``group.max.size`` (lowered since) rebalances at once, as in Kafka, so that its
        members can commit their offsets before the extra ones are left out."""
        for group in self.groups.values():
            for member in group.members.values():
                if member.heartbeat_timer is None:
                    self._schedule_heartbeat(group, member)
            if len(group) > self.config.max_size and group.is_in(GroupState.STABLE):
                log.info(
                    "group %s loaded with %d members, over group.max.size %d: rebalancing",
                    group.group_id,
                    len(group),
                    self.config.max_size,
                )
                self._prepare_rebalance(group)

    def unload(self) -> int:
        """The partition is led elsewhere: forget every group (waiting requests answered
        NOT_COORDINATOR, timers cancelled, nothing written). Returns how many."""
        doomed = list(self.groups.values())
        for group in doomed:
            self.shutdown_group(group, ErrorCode.NOT_COORDINATOR)
            group.transition_to(GroupState.DEAD, self._clock())
        self.groups.clear()
        return len(doomed)

    def shutdown_group(self, group: ClassicGroup, error: int) -> None:
        """Cancel a group's timers and answer its waiting JoinGroup/SyncGroup with ``error``."""
        self._cancel(group.join_timer)
        group.join_timer = None
        self.forget_pending_members(group)
        self._cancel(("sync", group.group_id))
        for member in group.members.values():
            self._cancel_heartbeat(group, member)
            if member.awaiting_join:
                assert member.join_future is not None
                member.join_future.set_result(JoinResult(error, member.member_id))
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(SyncResult(error))

    # -- JoinGroup -------------------------------------------------------------------
    def join(self, req: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        """Serve one JoinGroup on the group (the coordinator runs it as an operation keyed by
        the group id, once no other group type holds the id): the answer, or the future of
        the answer when the member waits for the rebalance. See :meth:`joined`."""
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id)
        is_unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        created = False
        if group is None:
            if not is_unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = ClassicGroup(req.group_id, self._clock())
            self.groups[req.group_id] = group
            created = True
        outcome: JoinResult | asyncio.Future[JoinResult]
        if group.state is GroupState.DEAD:
            outcome = JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id)
        elif not self._accept_joining_member(group, req.member_id):
            refused = group.members.get(req.member_id)
            if refused is not None:  # a member over the size leaves the group, as in Kafka
                self._remove_member_and_update_group(group, refused)
            outcome = JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id)
        elif is_unknown:
            outcome = self._join_new_member(group, req)
        else:
            outcome = self._join_existing_member(group, req)
        if (
            created
            and isinstance(outcome, JoinResult)
            and outcome.error_code
            and not group.members
            and not group.pending_members
        ):
            del self.groups[req.group_id]
        return outcome

    async def joined(
        self, req: JoinRequest, mark: int, outcome: JoinResult | asyncio.Future[JoinResult]
    ) -> JoinResult:
        """The answer of a JoinGroup :meth:`join` served after the write mark ``mark``: a
        static member replaced in a Stable group is answered once its record is stored."""
        if not isinstance(outcome, JoinResult):
            return await outcome
        if outcome.error_code == ErrorCode.NONE:
            error = await self._host.await_writes(req.group_id, mark)
            if error:
                return JoinResult(error, outcome.member_id)
        return outcome

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        match group.state:
            case GroupState.EMPTY | GroupState.DEAD:
                return True
            case GroupState.PREPARING_REBALANCE:
                member = group.members.get(member_id)
                return (
                    member is not None and member.awaiting_join
                ) or group.awaiting_join_count() < max_size
            case _:
                return member_id in group.members or len(group) < max_size

    def _join_new_member(
        self, group: ClassicGroup, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        new_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None and old_id in group.members:
                return self._replace_static_member(group, req, old_id, new_id)
            return self._add_member_and_rebalance(group, new_id, req)
        if req.require_known_member_id:
            group.pending_members[new_id] = self._schedule(
                ("pending-member", group.group_id, new_id),
                req.session_timeout_ms,
                self._expire_pending_member,
                group,
                new_id,
            )
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id)
        return self._add_member_and_rebalance(group, new_id, req)

    def _join_existing_member(
        self, group: ClassicGroup, req: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = req.member_id
        if member_id in group.pending_members:
            if not group.supports_protocols(req.protocol_type, req.protocols):
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            self._cancel(group.pending_members.pop(member_id))
            return self._add_member_and_rebalance(group, member_id, req)
        error = group.validate_member(member_id, req.group_instance_id)
        if error:
            return JoinResult(error, member_id)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        member = group.members[member_id]
        match group.state:
            case GroupState.PREPARING_REBALANCE:
                return self._update_member_and_rebalance(group, member, req)
            case GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    return self._current_join_result(group, member)
                return self._update_member_and_rebalance(group, member, req)
            case GroupState.STABLE:
                if group.is_leader(member_id) or not member.matches(req.protocols):
                    return self._update_member_and_rebalance(group, member, req)
                return self._current_join_result(group, member)
            case _:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _current_join_result(self, group: ClassicGroup, member: MemberMetadata) -> JoinResult:
        is_leader = group.is_leader(member.member_id)
        self._schedule_heartbeat(group, member)
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            group.current_member_metadata() if is_leader else [],
        )

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinRequest, old_id: str, new_id: str
    ) -> JoinResult | asyncio.Future[JoinResult]:
        assert req.group_instance_id is not None
        member = group.members[old_id]
        old_protocols = member.protocols
        current_leader = group.leader_id or ""
        if member.awaiting_join:
            assert member.join_future is not None
            member.join_future.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
            member.join_future = None
        if member.awaiting_sync:
            assert member.sync_future is not None
            member.sync_future.set_result(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            member.sync_future = None
        group.replace_static_member(req.group_instance_id, old_id, new_id)
        group_pending_sync = self._pending_sync(group)
        if old_id in group_pending_sync:
            group_pending_sync.discard(old_id)
            group_pending_sync.add(new_id)
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.protocols = list(req.protocols)
        self._schedule_heartbeat(group, member)
        match group.state:
            case GroupState.STABLE:
                selected = group.protocol_name
                if (
                    selected is not None
                    and group.select_protocol() == selected
                    and not self._subscription_changed(group, old_protocols, member.protocols)
                ):
                    self._store_group(group)
                    return JoinResult(
                        ErrorCode.NONE,
                        new_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        current_leader,
                        [],
                    )
                return self._await_join(group, member, rebalance=True)
            case GroupState.COMPLETING_REBALANCE:
                return self._await_join(group, member, rebalance=True)
            case GroupState.PREPARING_REBALANCE:
                return self._await_join(group, member, rebalance=False)
            case _:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, new_id)

    @staticmethod
    def _subscription_changed(
        group: ClassicGroup, old: list[tuple[str, bytes]], new: list[tuple[str, bytes]]
    ) -> bool:
        protocol = group.protocol_name
        old_meta = dict(old).get(protocol or "")
        new_meta = dict(new).get(protocol or "")
        if old_meta is None or new_meta is None:
            return True
        if group.protocol_type == "consumer":
            old_topics = subscribed_topics(old_meta)
            new_topics = subscribed_topics(new_meta)
            if old_topics is not None and new_topics is not None:
                return old_topics != new_topics
        return old_meta != new_meta

    def _await_join(
        self, group: ClassicGroup, member: MemberMetadata, *, rebalance: bool
    ) -> asyncio.Future[JoinResult]:
        """The future of ``member``'s JoinGroup; a rebalance starts (``rebalance``) or the
        join in progress completes if this member was the last one it waited for."""
        future: asyncio.Future[JoinResult] = self._loop().create_future()
        member.join_future = future
        if rebalance:
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)
        return future

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member_id: str, req: JoinRequest
    ) -> asyncio.Future[JoinResult]:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        group.add(member)
        group.new_member_added = True
        return self._await_join(
            group, member, rebalance=not group.is_in(GroupState.PREPARING_REBALANCE)
        )

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: MemberMetadata, req: JoinRequest
    ) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        if member.awaiting_join:
            # a duplicate join replaces the earlier one (the client gave up on it)
            assert member.join_future is not None
            member.join_future.set_result(
                JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
            )
        return self._await_join(
            group, member, rebalance=not group.is_in(GroupState.PREPARING_REBALANCE)
        )

    # -- rebalance -------------------------------------------------------------------
    @staticmethod
    def _rebalance_timeout_ms(group: ClassicGroup) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def _prepare_rebalance(self, group: ClassicGroup) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        self._cancel(group.join_timer)
        rebalance_ms = self._rebalance_timeout_ms(group)
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._clock())
        log.info(
            "preparing to rebalance group %s (generation %d)", group.group_id, group.generation_id
        )
        if initial:
            delay = min(self.config.initial_rebalance_delay_ms, rebalance_ms)
            group.initial_delay_remaining_ms = max(rebalance_ms - delay, 0)
            group.join_timer = self._schedule(
                ("join", group.group_id), delay, self._on_initial_delay, group
            )
            group.join_is_initial = True
        else:
            group.join_is_initial = False
            group.join_timer = self._schedule(
                ("join", group.group_id), rebalance_ms, self._complete_join, group
            )
            self._maybe_complete_join(group)

    def _on_initial_delay(self, group: ClassicGroup) -> None:
        group.join_timer = None
        if group.new_member_added and group.initial_delay_remaining_ms > 0:
            group.new_member_added = False
            initial = self.config.initial_rebalance_delay_ms
            delay = min(initial, group.initial_delay_remaining_ms)
            group.initial_delay_remaining_ms = max(group.initial_delay_remaining_ms - initial, 0)
            group.join_timer = self._schedule(
                ("join", group.group_id), delay, self._on_initial_delay, group
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.join_is_initial
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        self._cancel(group.join_timer)
        group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info(
                    "removing member %s of group %s: did not rejoin",
                    member.member_id,
                    group.group_id,
                )
                self._cancel_heartbeat(group, member)
                group.remove(member.member_id)
        if not group.maybe_elect_joined_leader() and group.members:
            # nobody rejoined (static members only): wait for them or their session expiry
            group.join_is_initial = False
            group.join_timer = self._schedule(
                ("join", group.group_id),
                self._rebalance_timeout_ms(group),
                self._complete_join,
                group,
            )
            return
        now = self._clock()
        group.init_next_generation(now)
        group.new_member_added = False
        if group.is_in(GroupState.EMPTY):
            log.info("group %s is empty (generation %d)", group.group_id, group.generation_id)
            self._store_group(group)
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation_id,
            len(group),
            group.protocol_name,
        )
        members = group.current_member_metadata()
        pending_sync = self._pending_sync(group)
        pending_sync.clear()
        for member in group.members.values():
            pending_sync.add(member.member_id)
            future = member.join_future
            member.join_future = None
            member.is_new = False
            if future is not None and not future.done():
                future.set_result(
                    JoinResult(
                        ErrorCode.NONE,
                        member.member_id,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        group.leader_id or "",
                        members if group.is_leader(member.member_id) else [],
                    )
                )
            self._schedule_heartbeat(group, member)
        self._schedule(
            ("sync", group.group_id),
            self._rebalance_timeout_ms(group),
            self._expire_pending_sync,
            group,
            group.generation_id,
        )

    @staticmethod
    def _pending_sync(group: ClassicGroup) -> set[str]:
        return group.pending_sync

    def _cancel_sync_timer(self, group: ClassicGroup) -> None:
        self._cancel(("sync", group.group_id))
        self._pending_sync(group).clear()

    def _expire_pending_sync(self, group: ClassicGroup, generation: int) -> None:
        if generation != group.generation_id or self.groups.get(group.group_id) is not group:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        laggards = [group.members[m] for m in self._pending_sync(group) if m in group.members]
        self._pending_sync(group).clear()
        if not laggards:
            return
        for member in laggards:
            log.info(
                "removing member %s of group %s: no SyncGroup", member.member_id, group.group_id
            )
            self._cancel_heartbeat(group, member)
            group.remove(member.member_id)
        self._prepare_rebalance(group)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(SyncResult(error))
            member.sync_future = None

    # -- member liveness -------------------------------------------------------------
    def _schedule_heartbeat(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._cancel_heartbeat(group, member)
        member.heartbeat_timer = self._schedule(
            ("heartbeat", group.group_id, member.member_id),
            member.session_timeout_ms,
            self._expire_member,
            group,
            member,
        )

    def _cancel_heartbeat(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._cancel(member.heartbeat_timer)
        member.heartbeat_timer = None

    def _expire_member(self, group: ClassicGroup, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:
            self._schedule_heartbeat(group, member)  # bounded by the rebalance timers instead
            return
        log.info(
            "member %s of group %s expired (session timeout %d ms)",
            member.member_id,
            group.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(group, member)

    def _expire_pending_member(self, group: ClassicGroup, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is None:
            return  # joined or left meanwhile
        self._maybe_complete_join(group)
        self.maybe_drop(group)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._cancel_heartbeat(group, member)
        if member.awaiting_join:
            assert member.join_future is not None
            member.join_future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        if member.awaiting_sync:
            assert member.sync_future is not None
            member.sync_future.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._pending_sync(group).discard(member.member_id)
        match group.state:
            case GroupState.STABLE | GroupState.COMPLETING_REBALANCE:
                self._prepare_rebalance(group)
            case GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(group)
            case GroupState.EMPTY | GroupState.DEAD:
                pass

    def maybe_drop(self, group: ClassicGroup) -> None:
        """Forget a group that never had a generation, members or offsets."""
        if (
            group.is_in(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and not self._offsets.has_offsets(group.group_id)
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]

    # -- SyncGroup -------------------------------------------------------------------
    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        outcome = self._sync(
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )
        if isinstance(outcome, SyncResult):
            return outcome
        return await outcome

    def _sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult | asyncio.Future[SyncResult]:
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            case GroupState.PREPARING_REBALANCE:
                return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            case GroupState.COMPLETING_REBALANCE:
                future: asyncio.Future[SyncResult] = self._loop().create_future()
                if member.awaiting_sync:
                    assert member.sync_future is not None
                    member.sync_future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_future = future
                self._pending_sync(group).discard(member_id)
                self._schedule_heartbeat(group, member)
                if group.is_leader(member_id):
                    self._complete_sync(group, assignments)
                return future
            case GroupState.STABLE:
                self._pending_sync(group).discard(member_id)
                self._schedule_heartbeat(group, member)
                return SyncResult(
                    ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                )
            case _:
                return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _complete_sync(self, group: ClassicGroup, assignments: dict[str, bytes]) -> None:
        mark = self._host.write_mark
        try:
            self._store_group(group, assignments)  # the members get them by its replay
        except Exception as exc:
            if isinstance(exc, CoordinatorError):
                log.warning("storing group %s failed: %s", group.group_id, exc)
                error = coordinator_error(exc.error_code)
            else:
                log.exception("storing group %s failed", group.group_id)
                error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            self._assignment_not_stored(group, error)
            return
        if self._host.wrote_since(group.group_id, mark):
            # cluster mode: hand the assignment out once the record is committed
            committed = self._host.await_writes(group.group_id, mark)
            self._host.spawn(
                self._complete_sync_when_committed(group, group.generation_id, committed)
            )
            return
        self._propagate_assignment(group)

    async def _complete_sync_when_committed(
        self, group: ClassicGroup, generation_id: int, committed: Coroutine[Any, Any, int]
    ) -> None:
        error = await committed
        if (
            self.groups.get(group.group_id) is not group
            or group.generation_id != generation_id
            or not group.is_in(GroupState.COMPLETING_REBALANCE)
        ):
            return  # unloaded, or the group moved on while the record was replicated
        if error:
            log.warning(
                "group %s: assignment of generation %d not committed (error %d)",
                group.group_id,
                generation_id,
                error,
            )
            self._assignment_not_stored(group, error)
            return
        self._propagate_assignment(group)

    def _assignment_not_stored(self, group: ClassicGroup, error: int) -> None:
        self._reset_and_propagate_assignment_error(group, error)
        self._prepare_rebalance(group)

    def _propagate_assignment(self, group: ClassicGroup) -> None:
        group.transition_to(GroupState.STABLE, self._clock())
        for member in group.members.values():
            if member.awaiting_sync:
                assert member.sync_future is not None
                member.sync_future.set_result(
                    SyncResult(
                        ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name
                    )
                )
            member.sync_future = None
        log.info("group %s stable at generation %d", group.group_id, group.generation_id)

    # -- Heartbeat -------------------------------------------------------------------
    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        match group.state:
            case GroupState.EMPTY:
                return ErrorCode.UNKNOWN_MEMBER_ID
            case GroupState.PREPARING_REBALANCE:
                self._schedule_heartbeat(group, member)
                return ErrorCode.REBALANCE_IN_PROGRESS
            case GroupState.COMPLETING_REBALANCE | GroupState.STABLE:
                self._schedule_heartbeat(group, member)
                return ErrorCode.NONE
            case _:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE

    # -- conversions -----------------------------------------------------------------
    def convert_to_consumer(self, group_id: str) -> int:
        """A consumer-protocol member joins ``group_id``: refuse a classic group in use,
        convert an empty one (its offsets stay)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE
        if group.members or group.pending_members or not group.is_in(GroupState.EMPTY):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        self._host.write_records(group_id, [GroupMetadataRecord(group_id, None)])
        return ErrorCode.NONE

    # -- LeaveGroup ------------------------------------------------------------------
    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[int, list[int]]:
        """Returns (top-level error, one error per leaving member)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors: list[int] = []
        for member_id, instance_id in members:
            if member_id == "":
                existing = group.static_member_id(instance_id)
                if existing is None or existing not in group.members:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = existing
            elif member_id in group.pending_members:
                self._cancel(group.pending_members.pop(member_id))
                self._maybe_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            else:
                error = group.validate_member(member_id, instance_id)
                if error:
                    errors.append(error)
                    continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_member_and_update_group(group, group.members[member_id])
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    # -- offsets ---------------------------------------------------------------------
    def prepare_offset_commit(self, req: CommitRequest) -> tuple[int, ClassicGroup | None]:
        """Check an OffsetCommit against the group (a simple commit to an unknown group
        creates it, Empty); a member's commit counts as a heartbeat. Returns the error and
        the group."""
        group = self.groups.get(req.group_id)
        if group is None:
            # Kafka 4: an unknown group is created by a commit without generation (a
            # TxnOffsetCommit's), or without generation nor member (an OffsetCommit's)
            named = bool(req.member_id) or req.group_instance_id is not None
            if req.generation_id >= 0 or (named and not req.transactional):
                return ErrorCode.ILLEGAL_GENERATION, None
            group = ClassicGroup(req.group_id, self._clock())
            self.groups[req.group_id] = group
        error = group.validate_offset_commit(req)
        if error:
            return error, group
        member = group.members.get(req.member_id)
        if member is not None and not req.transactional:
            self._schedule_heartbeat(group, member)
        return ErrorCode.NONE, group

    # -- persistence -----------------------------------------------------------------
    def _store_group(
        self, group: ClassicGroup, assignments: dict[str, bytes] | None = None
    ) -> None:
        """Write the group's record (with ``assignments``, a SyncGroup's); its replay, once
        committed, sets what it holds."""
        record = GroupMetadataRecord(group.group_id, group.to_record(assignments))
        self._host.write_records(group.group_id, [record])

    # -- timers of the group's shard ------------------------------------------------------
    def _schedule(
        self, key: TimerKey, delay_ms: int, callback: Callable[..., None], *args: object
    ) -> TimerKey:
        """Run ``callback(*args)`` in ``delay_ms`` as the shard's timer ``key`` (replacing
        it); returns the key."""
        self._timer.schedule(key, delay_ms, run_callback(callback, *args))
        return key

    def _cancel(self, key: TimerKey | None) -> None:
        if key is not None:
            self._timer.cancel(key)

    def forget_pending_members(self, group: ClassicGroup) -> None:
        """Drop the members waiting to join with their new id, and their expiry timers."""
        for key in group.pending_members.values():
            self._cancel(key)
        group.pending_members.clear()

    # -- describe ---------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupSummary:
        """DescribeGroups of a classic group (Dead when unknown)."""
        group = self.groups.get(group_id)
        if group is None:
            return GroupSummary(group_id, GroupState.DEAD.value, "", "")
        return group.summary()

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.has(member_id)

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()
