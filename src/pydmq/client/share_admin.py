"""Share group (KIP-932) admin calls of the CLI's client: ShareGroupDescribe at each group's
coordinator. Used by ``pydmq groups describe``; blocking, like the rest of the client."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.client.admin import find_coordinator
from pydmq.client.client import KafkaClient
from pydmq.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

__all__ = ["ShareGroupDescription", "ShareMemberDescription", "describe_share_groups"]


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
