"""ConsumerGroupManager: the KIP-848 consumer groups of one ``__consumer_offsets`` shard.

One per :class:`~pydmq.groups.shard.GroupCoordinatorShard`, owned by the shard's event queue
on the event loop. Its groups change only by :meth:`ConsumerGroupManager.replay` (the load,
and this node's writes once committed). Its operations (a heartbeat, an expired session or
rebalance timeout, a deletion) read the groups and return a
:class:`~pydmq.coordinator.api.CoordinatorResult`: the records to write and the answer. The
group coordinator schedules them as writes keyed by the group id, so an operation on a group
runs once the group's earlier writes are committed and replayed (or failed); that is what
makes computing on the committed state correct (see ARCHITECTURE.md, "Coordinator runtime").

Every member has a session timer (``group.consumer.session.timeout.ms``, reset by each
heartbeat) and, while it has partitions to revoke, a rebalance timer (its
``rebalance_timeout``): either firing removes it from the group. Both are timers of the
shard (:class:`~pydmq.coordinator.timer.CoordinatorTimer`), fired as keyed writes, and die
with it when the partition is unloaded.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pydmq.coordinator.api import CoordinatorError, CoordinatorResult
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.api import GroupSummary, MemberSummary
from pydmq.groups.consumer import heartbeat as hb
from pydmq.groups.consumer import records as rec
from pydmq.groups.consumer.api import ConsumerGroupServices, HeartbeatRequest, HeartbeatResult
from pydmq.groups.consumer.embedded import encode_assignment, encode_subscription
from pydmq.groups.consumer.group import ConsumerGroup, MemberState
from pydmq.groups.consumer.records import ConsumerGroupRecord
from pydmq.groups.consumer.replay import GroupChange, replay
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.groups.shard import GroupCoordinatorShard

__all__ = ["PROTOCOL_TYPE", "ConsumerGroupManager"]

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


class ConsumerGroupManager:
    """The consumer groups of one shard, their operations and their members' timers."""

    __slots__ = ("groups", "services", "timer")

    def __init__(
        self, services: ConsumerGroupServices, timer: CoordinatorTimer[GroupCoordinatorShard]
    ) -> None:
        self.services = services
        self.timer = timer
        self.groups: dict[str, ConsumerGroup] = {}

    # -- state -----------------------------------------------------------------------
    def replay(self, record: ConsumerGroupRecord) -> None:
        """Apply one committed record (the only way the groups change); a member removed
        loses its timers, a member no longer revoking its rebalance timer."""
        replay(self.groups, record)
        key = record.key
        if key.member is None:
            return
        if key.kind == rec.MEMBER_METADATA and record.value is None:
            self.timer.cancel(_session_key(key.group, key.member))
            self.timer.cancel(_rebalance_key(key.group, key.member))
        elif key.kind == rec.CURRENT_MEMBER:
            group = self.groups.get(key.group)
            member = None if group is None else group.members.get(key.member)
            if (
                member is None
                or member.left_static
                or member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self.timer.cancel(_rebalance_key(key.group, key.member))

    def start_timers(self) -> None:
        """Start the session timers of every member (after the load; needs the loop)."""
        for group in self.groups.values():
            for member_id in group.members:
                self.schedule_session(group.group_id, member_id)

    # -- operations --------------------------------------------------------------------
    def heartbeat(
        self, req: HeartbeatRequest, classic_guard: hb.ClassicGuard
    ) -> CoordinatorResult[ConsumerGroupRecord, HeartbeatResult]:
        """One validated ConsumerGroupHeartbeat (:mod:`pydmq.groups.consumer.heartbeat`)."""
        change, result = hb.heartbeat(
            self.services, self, self.groups.get(req.group_id), req, classic_guard
        )
        if result.error_code:
            return CoordinatorResult((), result)
        return CoordinatorResult(change.records, result)

    def expire_session(
        self, group_id: str, member_id: str
    ) -> CoordinatorResult[ConsumerGroupRecord, None]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return CoordinatorResult((), None)
        log.info(
            "member %s of consumer group %s expired (session timeout %d ms)",
            member_id,
            group_id,
            self.services.config.session_timeout_ms,
        )
        return self._remove(group, member_id)

    def expire_rebalance(
        self, group_id: str, member_id: str, member_epoch: int
    ) -> CoordinatorResult[ConsumerGroupRecord, None]:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if (
            group is None
            or member is None
            or member.state is not MemberState.UNREVOKED_PARTITIONS
            or member.member_epoch != member_epoch
        ):
            return CoordinatorResult((), None)
        log.info(
            "member %s of consumer group %s did not revoke its partitions within %d ms",
            member_id,
            group_id,
            member.rebalance_timeout_ms,
        )
        return self._remove(group, member_id)

    def _remove(
        self, group: ConsumerGroup, member_id: str
    ) -> CoordinatorResult[ConsumerGroupRecord, None]:
        change = GroupChange(group.group_id, group)
        hb.remove_member(self.services, self, change, member_id)
        return CoordinatorResult(change.records, None)

    def delete_error(self, group_id: str) -> int:
        """Why ``group_id`` cannot be deleted (NONE: it can)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def delete_records(self, group_id: str) -> list[ConsumerGroupRecord]:
        """The tombstones that delete an empty group (its committed offsets are the caller's);
        raises :class:`CoordinatorError` when it is gone or has members by now."""
        error = self.delete_error(group_id)
        if error:
            raise CoordinatorError(error)
        return [
            rec.target_epoch_record(group_id, None),
            rec.partition_metadata_record(group_id, None),
            rec.group_epoch_record(group_id, None),
        ]

    # -- reads -----------------------------------------------------------------------
    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        api_version: int,
        *,
        transactional: bool = False,
    ) -> int:
        """Kafka 4's rules for a commit to a consumer group (0 = accepted). A TxnOffsetCommit
        (``transactional``) carries the member epoch as its generation, at any version, and
        answers a stale epoch ILLEGAL_GENERATION."""
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # admin client or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        error = _validate_epoch(member.member_epoch, member_epoch)
        if transactional and error == ErrorCode.STALE_MEMBER_EPOCH:
            return ErrorCode.ILLEGAL_GENERATION
        return error

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        group = self.groups[group_id]
        if member_id is None and member_epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return _validate_epoch(member.member_epoch, member_epoch)

    def is_subscribed_to(self, group_id: str, topic: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and any(m.subscribes_to(topic) for m in group.members.values())

    def describe(self, group_id: str) -> GroupSummary:
        """DescribeGroups of a consumer group, as Kafka 4 answers it: protocol type
        "consumer", the group's assignor as protocol, each member's subscription and current
        assignment in the embedded consumer protocol format."""
        services = self.services
        group = self.groups[group_id]
        members = []
        for m in group.members.values():
            assigned = services.topic_names(m.assigned)
            topics = sorted(
                name for name in group.subscription_metadata if m.subscribes_to(name)
            ) or sorted(m.subscribed_topic_names)
            members.append(
                MemberSummary(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    encode_subscription(topics),
                    encode_assignment([(name, ps) for _, name, ps in assigned if name]),
                )
            )
        return GroupSummary(
            group_id, group.state.value, PROTOCOL_TYPE, services.assignor_for(group), members
        )

    def list_rows(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every consumer group."""
        return [(g.group_id, PROTOCOL_TYPE, g.state.value) for g in self.groups.values()]

    # -- timers (hb.MemberTimers) ------------------------------------------------------
    def schedule_session(self, group_id: str, member_id: str) -> None:
        def expire(shard: GroupCoordinatorShard) -> CoordinatorResult[Any, None]:
            return shard.consumer.expire_session(group_id, member_id)

        self.timer.schedule(
            _session_key(group_id, member_id),
            self.services.config.session_timeout_ms,
            expire,
            write_key=group_id,
        )

    def schedule_rebalance(
        self, group_id: str, member_id: str, member_epoch: int, timeout_ms: int
    ) -> None:
        def expire(shard: GroupCoordinatorShard) -> CoordinatorResult[Any, None]:
            return shard.consumer.expire_rebalance(group_id, member_id, member_epoch)

        self.timer.schedule(
            _rebalance_key(group_id, member_id), timeout_ms, expire, write_key=group_id
        )


def _validate_epoch(current: int, epoch: int) -> int:
    if epoch > current:
        return ErrorCode.FENCED_MEMBER_EPOCH
    if epoch < current:
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
