"""Consumer-group administration over the Kafka protocol (what kafka-consumer-groups.sh uses).

Every call takes a connected :class:`~pydmq.client.KafkaClient`; group requests go to the
group's coordinator (found with FindCoordinator, retried while the coordinator is loading).
Also here: decoders (and encoders) for the "consumer" protocol type's member metadata
(ConsumerProtocolSubscription) and assignment (ConsumerProtocolAssignment), versions 0-3.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

from pydmq.client.client import ApiKey, KafkaClient
from pydmq.client.errors import KafkaError, UnsupportedApiError, raise_for_error
from pydmq.protocol.errors import ErrorCode, ProtocolError
from pydmq.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from pydmq.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from pydmq.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from pydmq.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from pydmq.protocol.primitives import Reader, Writer

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "CommittedOffset",
    "ConsumerAssignment",
    "ConsumerSubscription",
    "Coordinator",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "decode_assignment",
    "decode_subscription",
    "delete_groups",
    "describe_groups",
    "encode_assignment",
    "encode_subscription",
    "find_coordinator",
    "list_groups",
    "offset_commit",
    "offset_fetch",
]

T = TypeVar("T")

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
_KEY_TYPE_GROUP: Final = 0
# OffsetFetch/OffsetCommit v10 name topics by id only; v9 carries everything these calls need.
_MAX_OFFSET_API_VERSION: Final = 9
_CONSUMER_PROTOCOL_MAX_VERSION: Final = 3
# Coordinator errors after which the coordinator is looked up again and the request retried.
_COORDINATOR_RETRY: Final = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
_RETRY_BACKOFF: Final = 0.1


# -- the "consumer" protocol: member metadata and assignment --------------------------------------


@dataclass(slots=True)
class ConsumerSubscription:
    """ConsumerProtocolSubscription: what a member of a "consumer" group subscribes to."""

    version: int
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)  # v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+


@dataclass(slots=True)
class ConsumerAssignment:
    """ConsumerProtocolAssignment: the partitions the leader gave a member."""

    version: int
    partitions: dict[str, list[int]] = field(default_factory=dict)
    user_data: bytes | None = None

    @property
    def partition_count(self) -> int:
        return sum(len(p) for p in self.partitions.values())


def _read_topic_partitions(r: Reader) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _ in range(r.array_length()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.int32_array(r.array_length()))
    return out


def _write_topic_partitions(w: Writer, partitions: Mapping[str, Sequence[int]]) -> None:
    w.int32(len(partitions))
    for topic, parts in partitions.items():
        w.string(topic)
        w.int32(len(parts))
        for p in parts:
            w.int32(p)


def _read_version(r: Reader, what: str) -> int:
    version = r.int16()
    if version < 0:
        raise ValueError(f"invalid {what} version {version}")
    return version


def decode_subscription(data: bytes) -> ConsumerSubscription:
    """Decode a consumer group member's metadata; raises ValueError if malformed.

    Versions newer than 3 are read as version 3 (later versions only append fields).
    """
    r = Reader(data)
    try:
        version = _read_version(r, "subscription")
        layout = min(version, _CONSUMER_PROTOCOL_MAX_VERSION)
        topics = [r.string() for _ in range(r.array_length())]
        sub = ConsumerSubscription(version, topics, r.nullable_bytes())
        if layout >= 1:
            sub.owned_partitions = _read_topic_partitions(r)
        if layout >= 2:
            sub.generation_id = r.int32()
        if layout >= 3:
            sub.rack_id = r.nullable_string()
    except ProtocolError as exc:
        raise ValueError(f"malformed consumer subscription: {exc}") from exc
    return sub


def decode_assignment(data: bytes) -> ConsumerAssignment:
    """Decode a consumer group member's assignment; raises ValueError if malformed.

    Empty bytes (a member that has no assignment yet) decode to an empty assignment.
    """
    if not data:
        return ConsumerAssignment(0)
    r = Reader(data)
    try:
        version = _read_version(r, "assignment")
        partitions = _read_topic_partitions(r)
        user_data = r.nullable_bytes()
    except ProtocolError as exc:
        raise ValueError(f"malformed consumer assignment: {exc}") from exc
    return ConsumerAssignment(version, partitions, user_data)


def encode_subscription(sub: ConsumerSubscription) -> bytes:
    w = Writer()
    version = sub.version
    if not 0 <= version <= _CONSUMER_PROTOCOL_MAX_VERSION:
        raise ValueError(f"cannot encode subscription version {version}")
    w.int16(version)
    w.int32(len(sub.topics))
    for topic in sub.topics:
        w.string(topic)
    w.nullable_bytes(sub.user_data)
    if version >= 1:
        _write_topic_partitions(w, sub.owned_partitions)
    if version >= 2:
        w.int32(sub.generation_id)
    if version >= 3:
        w.nullable_string(sub.rack_id)
    return bytes(w.getvalue())


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    if not 0 <= assignment.version <= _CONSUMER_PROTOCOL_MAX_VERSION:
        raise ValueError(f"cannot encode assignment version {assignment.version}")
    w = Writer()
    w.int16(assignment.version)
    _write_topic_partitions(w, assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return bytes(w.getvalue())


# -- coordinator ----------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Coordinator:
    node_id: int
    host: str
    port: int


def _deadline(client: KafkaClient) -> float:
    return time.monotonic() + client.timeout


def find_coordinator(client: KafkaClient, group_id: str) -> Coordinator:
    """The coordinator of ``group_id`` (retried while it is not available yet)."""
    deadline = _deadline(client)
    version = client.version_for(ApiKey.FIND_COORDINATOR)
    while True:
        if version >= 4:
            request = FindCoordinatorRequest(key_type=_KEY_TYPE_GROUP, coordinator_keys=[group_id])
        else:
            request = FindCoordinatorRequest(key=group_id, key_type=_KEY_TYPE_GROUP)
        response = client.call(request, FindCoordinatorResponse)
        if version >= 4:
            found = next((c for c in response.coordinators if c.key == group_id), None)
            if found is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "FindCoordinator: no answer")
            error, message = found.error_code, found.error_message
            node = Coordinator(found.node_id, found.host, found.port)
        else:
            error, message = response.error_code, response.error_message
            node = Coordinator(response.node_id, response.host, response.port)
        if not error:
            # Make the node reachable through client.connection(node_id) without a Metadata.
            client.brokers.setdefault(node.node_id, (node.host, node.port))
            return node
        if error not in _COORDINATOR_RETRY or time.monotonic() >= deadline:
            raise_for_error(error, message or f"coordinator of group {group_id!r}")
        time.sleep(_RETRY_BACKOFF)


def _on_coordinator(
    client: KafkaClient, group_id: str, call: Callable[[Coordinator], tuple[int, T]]
) -> tuple[int, T]:
    """Run ``call`` at the group's coordinator, again (found anew) after coordinator errors.

    ``call`` returns (error code, result); the last attempt's pair is returned.
    """
    deadline = _deadline(client)
    while True:
        coordinator = find_coordinator(client, group_id)
        error, result = call(coordinator)
        if error not in _COORDINATOR_RETRY or time.monotonic() >= deadline:
            return error, result
        time.sleep(_RETRY_BACKOFF)


# -- ListGroups -----------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class GroupListing:
    group_id: str
    state: str  # "" when the broker is older than ListGroups v4
    group_type: str  # "" when the broker is older than ListGroups v5
    protocol_type: str


def list_groups(
    client: KafkaClient, states: Iterable[str] = (), types: Iterable[str] = ()
) -> list[GroupListing]:
    """Groups of every broker of the cluster, sorted by id (filters need v4 / v5)."""
    states_filter, types_filter = list(states), list(types)
    client.refresh_metadata([])
    nodes: list[int | None] = [*sorted(client.brokers)] or [None]
    seen: dict[str, GroupListing] = {}
    for node in nodes:
        version = client.version_for(ApiKey.LIST_GROUPS, node)
        if states_filter and version < 4:
            raise UnsupportedApiError(
                ApiKey.LIST_GROUPS, "the broker cannot filter groups by state (needs ListGroups v4)"
            )
        if types_filter and version < 5:
            raise UnsupportedApiError(
                ApiKey.LIST_GROUPS, "the broker cannot filter groups by type (needs ListGroups v5)"
            )
        request = ListGroupsRequest(states_filter=states_filter, types_filter=types_filter)
        response = client.call(request, ListGroupsResponse, node_id=node)
        raise_for_error(response.error_code, "ListGroups")
        for g in response.groups:
            seen[g.group_id] = GroupListing(
                g.group_id,
                g.group_state if version >= 4 else "",
                g.group_type if version >= 5 else "",
                g.protocol_type,
            )
    return [seen[k] for k in sorted(seen)]


# -- DescribeGroups -------------------------------------------------------------------------------


@dataclass(slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    metadata: bytes
    assignment_bytes: bytes
    # Decoded when the group's protocol type is "consumer" (None otherwise or if malformed).
    subscription: ConsumerSubscription | None = None
    assignment: ConsumerAssignment | None = None


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor chosen by the group (Stable groups only)
    members: list[GroupMember]
    coordinator: Coordinator
    error_code: int = 0
    error_message: str | None = None

    @property
    def exists(self) -> bool:
        """False for a group the coordinator does not know (Dead, or GROUP_ID_NOT_FOUND)."""
        if self.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            return False
        return not (self.state == "Dead" and not self.members and not self.protocol_type)


def _member(protocol_type: str, raw: DescribedGroupMember) -> GroupMember:
    member = GroupMember(
        raw.member_id,
        raw.group_instance_id,
        raw.client_id,
        raw.client_host,
        bytes(raw.member_metadata),
        bytes(raw.member_assignment),
    )
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        if member.metadata:
            try:
                member.subscription = decode_subscription(member.metadata)
            except ValueError:
                member.subscription = None
        try:
            member.assignment = decode_assignment(member.assignment_bytes)
        except ValueError:
            member.assignment = None
    return member


def _description(group: DescribedGroup, coordinator: Coordinator) -> GroupDescription:
    return GroupDescription(
        group.group_id,
        group.group_state,
        group.protocol_type,
        group.protocol_data,
        [_member(group.protocol_type, m) for m in group.members],
        coordinator,
        group.error_code,
        group.error_message,
    )


def describe_groups(client: KafkaClient, group_ids: Sequence[str]) -> list[GroupDescription]:
    """DescribeGroups for each group at its coordinator (in the order given).

    Per-group errors are left in ``error_code``; an unknown group comes back with state
    "Dead" (or GROUP_ID_NOT_FOUND from DescribeGroups v6), see ``exists``.
    """
    out: list[GroupDescription] = []
    for group_id in group_ids:

        def call(
            coordinator: Coordinator, group_id: str = group_id
        ) -> tuple[int, GroupDescription]:
            response = client.call(
                DescribeGroupsRequest(groups=[group_id]),
                DescribeGroupsResponse,
                node_id=coordinator.node_id,
            )
            group = next((g for g in response.groups if g.group_id == group_id), None)
            if group is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {group_id!r}")
            return group.error_code, _description(group, coordinator)

        out.append(_on_coordinator(client, group_id, call)[1])
    return out


# -- OffsetFetch / OffsetCommit -------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class CommittedOffset:
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str | None = None


def offset_fetch(
    client: KafkaClient,
    group_id: str,
    partitions: Mapping[str, Sequence[int]] | None = None,
    *,
    require_stable: bool = False,
) -> dict[tuple[str, int], CommittedOffset]:
    """Committed offsets of ``group_id`` (``partitions`` None: every partition it has).

    Keys are ``(topic, partition)``; a partition asked for without a committed offset comes
    back with offset -1.
    """

    def call(coordinator: Coordinator) -> tuple[int, dict[tuple[str, int], CommittedOffset]]:
        node = coordinator.node_id
        version = min(client.version_for(ApiKey.OFFSET_FETCH, node), _MAX_OFFSET_API_VERSION)
        request = OffsetFetchRequest(require_stable=require_stable)
        if version >= 8:
            request.groups = [
                OffsetFetchRequestGroup(
                    group_id=group_id,
                    topics=None
                    if partitions is None
                    else [
                        OffsetFetchRequestTopics(name=t, partition_indexes=list(p))
                        for t, p in partitions.items()
                    ],
                )
            ]
        else:
            if partitions is None and version < 2:
                raise UnsupportedApiError(
                    ApiKey.OFFSET_FETCH, "fetching all offsets of a group needs OffsetFetch v2"
                )
            request.group_id = group_id
            request.topics = (
                None
                if partitions is None
                else [
                    OffsetFetchRequestTopic(name=t, partition_indexes=list(p))
                    for t, p in partitions.items()
                ]
            )
        response = client.send(ApiKey.OFFSET_FETCH, request, node_id=node, version=version)
        assert isinstance(response, OffsetFetchResponse)
        out: dict[tuple[str, int], CommittedOffset] = {}
        if version >= 8:
            group = next((g for g in response.groups if g.group_id == group_id), None)
            if group is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {group_id!r}")
            if group.error_code:
                return group.error_code, out
            for t in group.topics:
                for p in t.partitions:
                    raise_for_error(p.error_code, f"{t.name}-{p.partition_index}")
                    out[(t.name, p.partition_index)] = CommittedOffset(
                        p.committed_offset, p.committed_leader_epoch, p.metadata
                    )
        else:
            if response.error_code:
                return response.error_code, out
            for topic in response.topics:
                for part in topic.partitions:
                    raise_for_error(part.error_code, f"{topic.name}-{part.partition_index}")
                    out[(topic.name, part.partition_index)] = CommittedOffset(
                        part.committed_offset, part.committed_leader_epoch, part.metadata
                    )
        return 0, out

    error, result = _on_coordinator(client, group_id, call)
    raise_for_error(error, f"offsets of group {group_id!r}")
    return result


def offset_commit(
    client: KafkaClient,
    group_id: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    metadata: str | None = "",
) -> dict[tuple[str, int], int]:
    """Commit ``{(topic, partition): offset}``; returns the error code of each partition.

    With the defaults (generation -1, empty member id) this is an "admin" commit, which a
    Kafka coordinator accepts only while the group has no members (Empty, or not existing).
    """
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset))

    def call(coordinator: Coordinator) -> tuple[int, dict[tuple[str, int], int]]:
        node = coordinator.node_id
        version = min(client.version_for(ApiKey.OFFSET_COMMIT, node), _MAX_OFFSET_API_VERSION)
        request = OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            topics=[
                OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_metadata=metadata
                        )
                        for p, o in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
        )
        response = client.send(ApiKey.OFFSET_COMMIT, request, node_id=node, version=version)
        assert isinstance(response, OffsetCommitResponse)
        out = {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
        }
        retry = next((e for e in out.values() if e in _COORDINATOR_RETRY), 0)
        return retry, out

    return _on_coordinator(client, group_id, call)[1]


# -- DeleteGroups ---------------------------------------------------------------------------------


def delete_groups(client: KafkaClient, group_ids: Sequence[str]) -> dict[str, int]:
    """DeleteGroups at each group's coordinator; returns the error code per group id."""
    out: dict[str, int] = {}
    for group_id in dict.fromkeys(group_ids):

        def call(coordinator: Coordinator, group_id: str = group_id) -> tuple[int, None]:
            response = client.call(
                DeleteGroupsRequest(groups_names=[group_id]),
                DeleteGroupsResponse,
                node_id=coordinator.node_id,
            )
            result = next((r for r in response.results if r.group_id == group_id), None)
            if result is None:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {group_id!r}")
            return result.error_code, None

        out[group_id] = _on_coordinator(client, group_id, call)[0]
    return out
