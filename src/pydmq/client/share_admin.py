"""Share group (KIP-932) admin calls of the CLI's client, each at the group's coordinator:
ShareGroupDescribe, DescribeShareGroupOffsets and AlterShareGroupOffsets. Used by ``pydmq
groups describe`` and ``reset-offsets``; blocking, like the rest of the client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.client.admin import find_coordinator
from pydmq.client.client import KafkaClient
from pydmq.client.errors import KafkaError
from pydmq.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from pydmq.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
)
from pydmq.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

__all__ = [
    "ShareGroupDescription",
    "ShareMemberDescription",
    "alter_share_group_offsets",
    "describe_share_groups",
    "share_group_offsets",
]


@dataclass(slots=True, frozen=True)
class ShareMemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    assignment: dict[str, list[int]]  # topic name -> partitions


@dataclass(slots=True, frozen=True)
class ShareGroupDescription:
    group_id: str
    error_code: int
    error_message: str | None
    state: str
    group_epoch: int
    assignor: str
    members: list[ShareMemberDescription]


def describe_share_groups(
    client: KafkaClient, group_ids: Sequence[str]
) -> list[ShareGroupDescription]:
    """ShareGroupDescribe of each group at its coordinator (in the order given); per-group
    errors (GROUP_ID_NOT_FOUND for a group that is no share group) in ``error_code``."""
    out: list[ShareGroupDescription] = []
    for group_id in group_ids:
        coordinator = find_coordinator(client, group_id)
        response = client.call(
            ShareGroupDescribeRequest(group_ids=[group_id]),
            ShareGroupDescribeResponse,
            node_id=coordinator.node_id,
        )
        for g in response.groups:
            members = [
                ShareMemberDescription(
                    m.member_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    {t.topic_name: list(t.partitions) for t in m.assignment.topic_partitions},
                )
                for m in g.members
            ]
            out.append(
                ShareGroupDescription(
                    g.group_id,
                    g.error_code,
                    g.error_message,
                    g.group_state,
                    g.group_epoch,
                    g.assignor_name,
                    members,
                )
            )
    return out


def share_group_offsets(
    client: KafkaClient, group_id: str
) -> dict[tuple[str, int], tuple[int, int]]:
    """The start offset and lag of every share-partition ``group_id`` has ((topic, partition)
    -> (start offset, lag); -1 where unknown); KafkaError for a group-level error."""
    coordinator = find_coordinator(client, group_id)
    request = DescribeShareGroupOffsetsRequest(
        groups=[DescribeShareGroupOffsetsRequestGroup(group_id=group_id, topics=None)]
    )
    response = client.call(request, DescribeShareGroupOffsetsResponse, node_id=coordinator.node_id)
    (group,) = response.groups
    if group.error_code:
        raise KafkaError(group.error_code, group.error_message or f"group {group_id!r}")
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag)
        for t in group.topics
        for p in t.partitions
        if not p.error_code
    }


def alter_share_group_offsets(
    client: KafkaClient, group_id: str, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """Set the start offsets of ``group_id``'s share-partitions (the group must have no
    members); (topic, partition) -> error code (0: done). KafkaError for a group-level error
    (NON_EMPTY_GROUP while it has members)."""
    by_topic: dict[str, list[AlterShareGroupOffsetsRequestPartition]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append(
            AlterShareGroupOffsetsRequestPartition(partition_index=partition, start_offset=offset)
        )
    request = AlterShareGroupOffsetsRequest(
        group_id=group_id,
        topics=[
            AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=parts)
            for t, parts in by_topic.items()
        ],
    )
    coordinator = find_coordinator(client, group_id)
    response = client.call(request, AlterShareGroupOffsetsResponse, node_id=coordinator.node_id)
    if response.error_code:
        raise KafkaError(response.error_code, response.error_message or f"group {group_id!r}")
    return {
        (t.topic_name, p.partition_index): p.error_code
        for t in response.responses
        for p in t.partitions
    }
