"""ConsumerGroup: one KIP-848 consumer group's epochs, members and reconciliation (pure state).

Epochs:

- the *group epoch* moves when the group's shape changes: a member joins or leaves (or is
  fenced), a subscription changes, or the metadata of a subscribed topic changes (created,
  deleted, partitions added);
- the *target assignment epoch* is the group epoch the current target assignment was computed
  for (the coordinator recomputes it as soon as the group epoch is ahead);
- each *member epoch* reaches the target assignment epoch through reconciliation.

Reconciliation of one member (:func:`reconcile`, Kafka's rules, run on its heartbeat):

1. partitions the member holds that the target no longer gives it are *pending revocation*:
   they leave its assignment at once, and the member stays in its epoch in state
   UNREVOKED_PARTITIONS until its heartbeat reports (``topic_partitions``) that it no longer
   owns them (or the rebalance timeout fences it);
2. a partition of its target is added only once no other member holds it (assigned or pending
   revocation); until then the member is UNRELEASED_PARTITIONS, already at the new epoch;
3. with nothing to revoke and nothing unreleased, the member is STABLE at the target epoch.

So no partition is ever held by two members, epochs never go backwards, and revocation always
precedes assignment elsewhere. Group state is derived as Kafka's: EMPTY (no members), ASSIGNING
(group epoch ahead of the target), RECONCILING (a member not STABLE at the target epoch),
STABLE; DEAD once deleted.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pydmq.groups.consumer.topic_regex import TopicRegex

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "MemberState",
    "Partitions",
    "Reconciled",
    "freeze",
    "reconcile",
]

Partitions = dict[uuid.UUID, frozenset[int]]


def freeze(parts: Mapping[uuid.UUID, Iterable[int]]) -> Partitions:
    """Normalised copy: frozensets, no empty topics."""
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2


@dataclass(eq=False, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    left_static: bool = False  # left with epoch -2; its assignment is kept for the instance
    compiled_regex: TopicRegex | None = None

    def clone(self) -> ConsumerGroupMember:
        """A copy (partition sets are shared: they are replaced, never changed in place)."""
        return ConsumerGroupMember(
            self.member_id,
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.server_assignor,
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned,
            self.pending_revocation,
            self.left_static,
            self.compiled_regex,
        )

    @property
    def reported_epoch(self) -> int:
        return -2 if self.left_static else self.member_epoch

    def subscribes_to(self, topic: str) -> bool:
        if topic in self.subscribed_topic_names:
            return True
        return self.compiled_regex is not None and self.compiled_regex.fullmatch(topic) is not None


@dataclass(frozen=True, slots=True)
class Reconciled:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions


def _owns_any(owned: Partitions | None, revoking: Partitions) -> bool:
    if owned is None:
        return True  # not reported: assume the member still holds them
    return any(owned.get(t, frozenset()) & ps for t, ps in revoking.items())


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    owned: Partitions | None,
    owner_of: Callable[[uuid.UUID, int], str | None],
) -> Reconciled:
    """The next state of ``member`` towards ``target`` (Kafka's CurrentAssignmentBuilder rules).

    ``owned`` is what the member's heartbeat reported (None: not reported); ``owner_of``
    answers which member currently holds a partition (assigned or pending revocation).
    """
    unchanged = Reconciled(
        member.member_epoch,
        member.previous_member_epoch,
        member.state,
        member.assigned,
        member.pending_revocation,
    )
    match member.state:
        case MemberState.STABLE:
            if member.member_epoch == target_epoch:
                return unchanged
        case MemberState.UNREVOKED_PARTITIONS:
            if _owns_any(owned, member.pending_revocation):
                return unchanged
        case MemberState.UNRELEASED_PARTITIONS:
            pass
    return _next_assignment(member, target_epoch, target, owned, owner_of)


def _next_assignment(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Partitions,
    owned: Partitions | None,
    owner_of: Callable[[uuid.UUID, int], str | None],
) -> Reconciled:
    kept: Partitions = {}
    revoking: Partitions = {}
    adding: Partitions = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - wanted
        add: set[int] = set()
        for p in wanted - keep:
            holder = owner_of(topic_id, p)
            if holder is None or holder == member.member_id:
                add.add(p)
            else:
                unreleased = True
        if keep:
            kept[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if add:
            adding[topic_id] = frozenset(add)
    if revoking and _owns_any(owned, revoking):
        # revoke first: the epoch stays until the member confirms
        return Reconciled(
            member.member_epoch,
            member.previous_member_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            kept,
            revoking,
        )
    assigned = dict(kept)
    for topic_id, ps in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | ps
    previous = (
        member.member_epoch if target_epoch != member.member_epoch else member.previous_member_epoch
    )
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(target_epoch, previous, state, assigned, {})


class ConsumerGroup:
    """A consumer-protocol group. Owned by its shard's event queue; changed only by replaying
    its records (:mod:`pydmq.groups.consumer.replay`)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Partitions] = {}  # member id -> target partitions
        # topic name -> (topic id, partition count) of the subscribed topics that exist
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> holding member
        # How many members subscribe to each topic name, and to each regex (with its compiled
        # form), as Kafka's subscribedTopicNames: subscribed_topic_names reads these, so a
        # heartbeat costs O(subscribed topics), not O(members).
        self._name_subscribers: dict[str, int] = {}
        self._regex_subscribers: dict[str, tuple[TopicRegex, int]] = {}
        # Members whose objects this group shares with the group it was copied from: cloned
        # on their first change here (writable_member), so a copy costs O(1) per member.
        self._borrowed: set[str] = set()
        self.dead = False

    # -- state -----------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def copy(self) -> ConsumerGroup:
        """A copy to compute a write on: members are shared until the copy changes one
        (:meth:`writable_member` clones it then), partition sets are shared (they are never
        changed in place, only replaced). A write changes a few members of a large group:
        cloning all of them was O(members) per heartbeat."""
        other = ConsumerGroup(self.group_id)
        other.group_epoch = self.group_epoch
        other.assignment_epoch = self.assignment_epoch
        other.members = dict(self.members)
        other._borrowed = set(self.members)
        other.static_members = dict(self.static_members)
        other.target = dict(self.target)
        other.subscription_metadata = dict(self.subscription_metadata)
        other.owners = dict(self.owners)
        other._name_subscribers = dict(self._name_subscribers)
        other._regex_subscribers = dict(self._regex_subscribers)
        other.dead = self.dead
        return other

    # -- members ---------------------------------------------------------------------
    def writable_member(self, member_id: str) -> ConsumerGroupMember | None:
        """``member_id``'s member, this group's own to change in place (None: no such
        member); every change of a member goes through here (see :meth:`copy`)."""
        member = self.members.get(member_id)
        if member is not None and member_id in self._borrowed:
            member = self.members[member_id] = member.clone()
            self._borrowed.discard(member_id)
        return member

    def add_member(self, member: ConsumerGroupMember) -> None:
        self._borrowed.discard(member.member_id)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._hold(member)
        self._count_subscription(member, 1)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._borrowed.discard(member_id)
        self._release(member)
        self._count_subscription(member, -1)
        self.target.pop(member_id, None)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]
        return member

    def update_subscription(
        self,
        member: ConsumerGroupMember,
        names: tuple[str, ...],
        regex: str | None,
        compiled: TopicRegex | None,
    ) -> None:
        """Give ``member`` (this group's, from :meth:`writable_member`) what it subscribes
        to: topic names, and a regex with its compiled form (None when it has none or it does
        not compile)."""
        self._count_subscription(member, -1)
        member.subscribed_topic_names = names
        member.subscribed_topic_regex = regex
        member.compiled_regex = compiled
        self._count_subscription(member, 1)

    def _count_subscription(self, member: ConsumerGroupMember, delta: int) -> None:
        for name in member.subscribed_topic_names:
            count = self._name_subscribers.get(name, 0) + delta
            if count > 0:
                self._name_subscribers[name] = count
            else:
                del self._name_subscribers[name]
        regex, compiled = member.subscribed_topic_regex, member.compiled_regex
        if regex is not None and compiled is not None:
            count = self._regex_subscribers.get(regex, (compiled, 0))[1] + delta
            if count > 0:
                self._regex_subscribers[regex] = (compiled, count)
            else:
                del self._regex_subscribers[regex]

    @property
    def has_regex_subscriptions(self) -> bool:
        """Whether a member subscribes by a (valid) regex."""
        return bool(self._regex_subscribers)

    def update_assignment(self, member: ConsumerGroupMember, next_state: Reconciled) -> bool:
        """Give ``member`` (this group's, from :meth:`writable_member`) its next epochs,
        state and partitions. A partition another member holds is never taken: then the
        member is reset (epoch 0, nothing held) and False is returned (only a damaged log can
        ask for that: reconciliation never does)."""
        self._release(member)
        conflict = any(
            self.owners.get((topic_id, p), member.member_id) != member.member_id
            for parts in (next_state.assigned, next_state.pending_revocation)
            for topic_id, ps in parts.items()
            for p in ps
        )
        if conflict:
            next_state = Reconciled(0, next_state.previous_member_epoch, MemberState.STABLE, {}, {})
        member.member_epoch = next_state.member_epoch
        member.previous_member_epoch = next_state.previous_member_epoch
        member.state = next_state.state
        member.assigned = next_state.assigned
        member.pending_revocation = next_state.pending_revocation
        self._hold(member)
        return not conflict

    def _hold(self, member: ConsumerGroupMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    self.owners[(topic_id, p)] = member.member_id

    def _release(self, member: ConsumerGroupMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    if self.owners.get((topic_id, p)) == member.member_id:
                        del self.owners[(topic_id, p)]

    def subscribed_topic_names(self, all_topics: Iterable[str]) -> set[str]:
        """Names subscribed by any member (explicitly, or through a regex over ``all_topics``)."""
        names = set(self._name_subscribers)
        patterns = [compiled for compiled, _count in self._regex_subscribers.values()]
        if patterns:
            for topic in all_topics:
                if any(p.fullmatch(topic) for p in patterns):
                    names.add(topic)
        return names
