"""ClassicGroup: one classic-protocol consumer group's state, members and generation.

Pure state (no timers, no I/O): the
:class:`~pydmq.groups.classic.manager.ClassicGroupManager` drives the transitions. States and allowed transitions are Kafka's::

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
      ^                 ^    ^                                          │ leader SyncGroup
      │                 │    └──────── member joins/leaves/expires ─────┤
      └─ last member ───┴──────────── member joins/leaves/expires ── Stable
    any ──> Dead (deleted, or offsets expired)

Protocol selection is Kafka's: among the protocols every member supports, each member votes
for the first one in its own preference order that all support; the most votes wins (ties go
to the candidate listed first by the first member). As Kafka's ClassicGroup, the group also
validates a member's requests against itself (:meth:`ClassicGroup.validate_member`,
:meth:`ClassicGroup.validate_offset_commit`), builds its ``__consumer_offsets`` record
(:meth:`ClassicGroup.to_record`), is restored from it at load
(:meth:`ClassicGroup.from_record`) and builds its DescribeGroups summary
(:meth:`ClassicGroup.summary`).
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field

from pydmq.groups.api import CommitRequest, GroupSummary, MemberSummary
from pydmq.groups.records import GroupMetadataValue, MemberMetadataValue
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "ClassicGroup",
    "GroupState",
    "JoinResult",
    "MemberMetadata",
    "SyncResult",
    "subscribed_topics",
]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
            GroupState.DEAD,
        }
    ),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup response carries."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True, eq=False)
class MemberMetadata:
    """One member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_timer: Hashable | None = None  # key of its session timer in its shard

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ``consumer`` protocol subscription (ConsumerProtocolSubscription), or None.

    Layout: int16 version, int32 topic count, int16-length topic names, then fields we do not
    need (user data, owned partitions, rack).
    """
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", metadata, pos)
        pos += 4
        if count < 0 or count > len(metadata):
            return None
        topics: set[str] = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(metadata[pos : pos + n].decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class ClassicGroup:
    """A classic group. Owned by the event loop."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: dict[str, Hashable] = {}  # member id -> its expiry timer key
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.join_timer: Hashable | None = None  # key of the join (or initial delay) timer
        self.join_deadline: float = 0.0
        self.initial_delay_remaining_ms = 0
        self.new_member_added = False
        self.join_is_initial = False
        self.pending_sync: set[str] = set()  # members that have not sent SyncGroup yet

    # -- state -----------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    # -- members ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def replace_static_member(
        self, group_instance_id: str, old_id: str, new_id: str
    ) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.awaiting_join_count() and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def maybe_elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did."""
        if self.leader_id is not None:
            leader = self.members.get(self.leader_id)
            if leader is not None and leader.awaiting_join:
                return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        self.leader_id = next(iter(self.members), None)
        return False

    # -- protocols -------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for member in members[1:]:
            common &= set(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol is supported by every member")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        order = {name: i for i, name in enumerate(first.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -order.get(name, 0)))

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            return []
        return [
            (m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name))
            for m in self.members.values()
        ]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether any member's subscription (``consumer`` protocol) names ``topic``."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return False
        for member in self.members.values():
            try:
                topics = subscribed_topics(member.metadata_for(self.protocol_name))
            except KeyError:
                continue
            if topics is None or topic in topics:
                return True
        return False

    # -- validation ------------------------------------------------------------------
    def validate_member(self, member_id: str, group_instance_id: str | None) -> int:
        """Whether ``member_id`` (with ``group_instance_id``) is a member: NONE,
        UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if group_instance_id is not None:
            existing = self.static_member_id(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        if not self.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def validate_offset_commit(self, req: CommitRequest) -> int:
        """Kafka 4's rules for an OffsetCommit or a TxnOffsetCommit to this group (NONE:
        accepted). A transactional commit without generation nor member (a producer's
        ``sendOffsetsToTransaction`` with only the group id, before KIP-447) is accepted in
        any state, and one with them also while the group completes a rebalance."""
        if self.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and self.is_in(GroupState.EMPTY):
            return ErrorCode.NONE  # admin client or a consumer not using group management
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self.validate_member(req.member_id, req.group_instance_id)
            if error:
                return error
            if req.generation_id != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not req.transactional and not self.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not req.transactional and self.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- record and description ----------------------------------------------------------
    def to_record(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The group's ``__consumer_offsets`` value: generation, protocol, leader, members
        with the metadata of the selected protocol and their assignments (``assignments``,
        when given, instead of the members' own)."""
        protocol = self.protocol_name
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id if self.members else None,
            current_state_timestamp=self.state_timestamp_ms,
            members=tuple(
                MemberMetadataValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    dict(m.protocols).get(protocol or "", b""),
                    m.assignment if assignments is None else assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now_ms: int) -> ClassicGroup:
        """The group a load restores from its record, as Kafka's: Stable with the record's
        generation, protocol, leader and members (each with the record's subscription as its
        only protocol, and its assignment), or Empty when the record has no members; since
        the record's timestamp (``now_ms`` when it has none)."""
        since = value.current_state_timestamp if value.current_state_timestamp > 0 else now_ms
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = cls(group_id, since, state)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for stored in value.members:
            group.add(
                MemberMetadata(
                    member_id=stored.member_id,
                    group_instance_id=stored.group_instance_id,
                    client_id=stored.client_id,
                    client_host=stored.client_host,
                    rebalance_timeout_ms=stored.rebalance_timeout,
                    session_timeout_ms=stored.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=[(value.protocol or "", stored.subscription)],
                    assignment=stored.assignment,
                )
            )
        if value.leader in group.members:
            group.leader_id = value.leader
        return group

    def replay(self, value: GroupMetadataValue) -> None:
        """Apply the group's committed record, written by this node while it leads the group
        (its members and their rebalance state are live here): generation, protocol type,
        and for the members the group has the protocol, the leader and their assignments; an
        Empty group's record also says since when it is Empty. A record of an older
        generation than the group's (a rebalance completed meanwhile) changes nothing."""
        if value.generation < self.generation_id:
            return
        self.generation_id = value.generation
        self.protocol_type = value.protocol_type or None
        if not self.members:
            self.protocol_name = None
            if not value.members and value.current_state_timestamp > 0:
                self.state_timestamp_ms = value.current_state_timestamp
            return
        self.protocol_name = value.protocol
        if value.leader in self.members:
            self.leader_id = value.leader
        for stored in value.members:
            member = self.members.get(stored.member_id)
            if member is not None:
                member.assignment = stored.assignment

    def summary(self) -> GroupSummary:
        """DescribeGroups of this group: members' metadata and assignments only while
        Stable."""
        if self.is_in(GroupState.STABLE) and self.protocol_name is not None:
            protocol = self.protocol_name
            members = [
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    dict(m.protocols).get(protocol, b""),
                    m.assignment,
                )
                for m in self.members.values()
            ]
        else:
            protocol = ""
            members = [
                MemberSummary(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b""
                )
                for m in self.members.values()
            ]
        return GroupSummary(
            self.group_id, self.state.value, self.protocol_type or "", protocol, members
        )
