"""Share group membership and assignment (KIP-932's ShareGroupHeartbeat), sans-IO.

A :class:`ShareGroups` keeps every share group this node coordinates: its members (member id,
member epoch, subscribed topic names, rack, client id and host, the deadline of its session)
and the group epoch, which moves whenever membership or subscriptions change. Assignment is
server-side and simple, like Kafka's ``SimpleAssignor``: the subscribed partitions are spread
over the members round-robin, and when there are more members than partitions each partition
is given to several members, so that every member reads something and every partition is read.
Members are not fenced while an assignment moves (a share-partition may be read by many
members at once): a heartbeat answers the member's assignment whenever it differs from the
one last answered to it, with the group epoch as the member's new epoch.

Membership lives in memory (a restarted node's members rejoin: their next heartbeat answers
UNKNOWN_MEMBER_ID). Owned by the broker's event loop; time is given as ``now_ms``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydmq.protocol.errors import ErrorCode

__all__ = [
    "ShareGroup",
    "ShareGroupHeartbeatResult",
    "ShareGroups",
    "ShareMember",
    "TopicPartitions",
]

# A subscribed topic name -> (topic id, partition count), or None when it does not exist.
TopicPartitions = Callable[[str], tuple[uuid.UUID, int] | None]

LEAVE_GROUP_MEMBER_EPOCH = -1


@dataclass(slots=True)
class ShareMember:
    """One member of a share group, as its last heartbeat described it."""

    member_id: str
    member_epoch: int
    subscribed_topic_names: list[str]
    rack_id: str | None
    client_id: str
    client_host: str
    session_deadline_ms: int
    assignment: dict[uuid.UUID, list[int]] = field(default_factory=dict)
    # The assignment last answered to the member (None: none yet).
    reported: dict[uuid.UUID, list[int]] | None = None


@dataclass(slots=True)
class ShareGroup:
    """A share group: its epoch, its members and the partitions it reads."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # The subscribed topics' (topic id, partition count) when the assignment was computed.
    subscribed: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty, Stable."""
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatResult:
    """The answer to one heartbeat."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Mapping[uuid.UUID, Sequence[int]] | None = None


class ShareGroups:
    """Every share group of this node (see the module): heartbeats, expiry, describe."""

    def __init__(self, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.groups: dict[str, ShareGroup] = {}
        # Called with (group id, member id) when a member leaves or its session expires.
        self.on_member_removed: Callable[[str, str], None] = lambda group_id, member_id: None

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: list[str] | None,
        client_id: str,
        client_host: str,
        topics: TopicPartitions,
        now_ms: int,
    ) -> ShareGroupHeartbeatResult:
        """Join (epoch 0), heartbeat (the member's epoch) or leave (-1)."""
        if not group_id:
            return ShareGroupHeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return ShareGroupHeartbeatResult(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        group = self.groups.get(group_id)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is not None and member_id in group.members:
                self._remove(group, member_id)
                self._reassign(group, topics)
            return ShareGroupHeartbeatResult(
                ErrorCode.NONE, member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
            )
        if group is not None:
            self.expire_sessions(group, topics, now_ms)
        member = None if group is None else group.members.get(member_id)
        if member_epoch == 0:
            if subscribed_topic_names is None:
                return ShareGroupHeartbeatResult(
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames must be set in first request.",
                )
            if group is None:
                group = self.groups.setdefault(group_id, ShareGroup(group_id))
            if member is None:
                member = ShareMember(
                    member_id, 0, list(subscribed_topic_names), rack_id, client_id, client_host, 0
                )
                group.members[member_id] = member
                group.group_epoch += 1
        elif member is None:
            return ShareGroupHeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group."
            )
        elif member_epoch != member.member_epoch:
            return ShareGroupHeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"Member epoch {member_epoch} is not the current epoch {member.member_epoch}.",
            )
        assert group is not None
        if subscribed_topic_names is not None and sorted(subscribed_topic_names) != sorted(
            member.subscribed_topic_names
        ):
            member.subscribed_topic_names = list(subscribed_topic_names)
            group.group_epoch += 1
        if rack_id is not None:
            member.rack_id = rack_id
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        self._reassign(group, topics)
        changed = member_epoch == 0 or member.assignment != member.reported
        if changed:
            member.member_epoch = group.group_epoch
            member.reported = {t: list(ps) for t, ps in member.assignment.items()}
        return ShareGroupHeartbeatResult(
            ErrorCode.NONE,
            member_id=member_id,
            member_epoch=member.member_epoch,
            assignment=member.assignment if changed else None,
        )

    def expire_sessions(self, group: ShareGroup, topics: TopicPartitions, now_ms: int) -> None:
        """Remove the members whose session timed out (no heartbeat within
        ``group.share.session.timeout.ms``)."""
        expired = [m.member_id for m in group.members.values() if m.session_deadline_ms <= now_ms]
        for member_id in expired:
            self._remove(group, member_id)
        if expired:
            self._reassign(group, topics)

    def delete(self, group_id: str) -> ErrorCode:
        """Delete an empty share group (DeleteGroups)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        return ErrorCode.NONE

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        group.group_epoch += 1
        self.on_member_removed(group.group_id, member_id)

    def _reassign(self, group: ShareGroup, topics: TopicPartitions) -> None:
        """Recompute every member's assignment when membership or the topics changed."""
        names = sorted({n for m in group.members.values() for n in m.subscribed_topic_names})
        subscribed = {n: found for n in names if (found := topics(n)) is not None}
        if group.assignment_epoch == group.group_epoch and subscribed == group.subscribed:
            return
        if subscribed != group.subscribed and group.assignment_epoch == group.group_epoch:
            group.group_epoch += 1
        group.subscribed = subscribed
        group.assignment_epoch = group.group_epoch
        for member in group.members.values():
            member.assignment = {}
        members = sorted(group.members)
        for name, (topic_id, count) in sorted(subscribed.items()):
            readers = [m for m in members if name in group.members[m].subscribed_topic_names]
            if not readers:
                continue
            for reader, partitions in zip(readers, _spread(count, len(readers)), strict=True):
                if partitions:
                    group.members[reader].assignment[topic_id] = partitions


def _spread(partitions: int, members: int) -> list[list[int]]:
    """Each of ``members`` members' partitions among ``partitions``: round-robin when there
    are at least as many partitions as members, else member i reads partition i mod n."""
    if partitions == 0:
        return [[] for _ in range(members)]
    if partitions >= members:
        return [list(range(i, partitions, members)) for i in range(members)]
    return [[i % partitions] for i in range(members)]
