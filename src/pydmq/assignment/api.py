"""The server-side assignor port of the consumer group protocol (KIP-848).

An assignor turns a group's members and their subscriptions into a *target assignment*:
partitions per member, keyed by topic id. It is pure (no I/O, no clock) and is called on the
event loop whenever the group epoch moves past the target assignment epoch. Assignors are
registered through the ``pydmq_register_group_assignors`` hook as
:class:`GroupAssignorSpec` objects; a client picks one by name with ``server_assignor``
(``group.remote.assignor`` in Java, ``group.remote.assignor`` in librdkafka).

The coordinator validates every result (see :func:`validate_assignment`): a partition at
most once, only partitions of existing topics the member subscribes to, only known members.
An invalid result is rejected and the previous target is kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "AssignmentSpec",
    "GroupAssignor",
    "GroupAssignorSpec",
    "InvalidAssignmentError",
    "MemberAssignment",
    "MemberSubscription",
    "TopicMetadata",
    "validate_assignment",
]

# topic id -> partition numbers
MemberAssignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """A topic a member of the group subscribes to."""

    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """One member as an assignor sees it.

    ``current`` is the member's partitions in the previous target assignment (use it to be
    sticky); ``subscribed_topic_ids`` are the existing topics it subscribes to (names and
    regular expression already resolved).
    """

    member_id: str
    instance_id: str | None
    rack_id: str | None
    subscribed_topic_ids: frozenset[uuid.UUID]
    current: MemberAssignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """Everything an assignor may use: members (by member id) and topics (by topic id)."""

    members: Mapping[str, MemberSubscription]
    topics: Mapping[uuid.UUID, TopicMetadata]


class GroupAssignor(Protocol):
    """Computes a target assignment. Must be deterministic for a given spec."""

    def assign(self, spec: AssignmentSpec) -> Mapping[str, MemberAssignment]: ...


@dataclass(frozen=True, slots=True)
class GroupAssignorSpec:
    """A named server-side assignor. ``name`` is what clients send as ``server_assignor``."""

    name: str
    assignor: GroupAssignor
    description: str = ""


class InvalidAssignmentError(ValueError):
    """An assignor returned an assignment that breaks the protocol's invariants."""


def validate_assignment(
    spec: AssignmentSpec, result: Mapping[str, MemberAssignment]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Check ``result`` against ``spec``; return it normalised (members without partitions
    map to ``{}``, empty topic entries dropped). Raises :class:`InvalidAssignmentError`."""
    owners: dict[tuple[uuid.UUID, int], str] = {}
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in spec.members}
    for member_id, assignment in result.items():
        member = spec.members.get(member_id)
        if member is None:
            raise InvalidAssignmentError(f"unknown member {member_id!r} in assignment")
        for topic_id, partitions in assignment.items():
            if not partitions:
                continue
            topic = spec.topics.get(topic_id)
            if topic is None or topic_id not in member.subscribed_topic_ids:
                raise InvalidAssignmentError(
                    f"member {member_id!r} got topic {topic_id} it does not subscribe to"
                )
            for p in partitions:
                if not 0 <= p < topic.partitions:
                    raise InvalidAssignmentError(f"partition {topic.name}-{p} does not exist")
                previous = owners.setdefault((topic_id, p), member_id)
                if previous != member_id:
                    raise InvalidAssignmentError(
                        f"partition {topic.name}-{p} assigned to {previous!r} and {member_id!r}"
                    )
            out[member_id][topic_id] = frozenset(partitions)
    return out
