"""ShareGroupDescribe (key 77), v1: share groups as Kafka 4 describes them (KIP-932).

Per group: state (Empty, Stable), group epoch, assignment epoch, the assignor (``simple``) and
each member's epoch, rack, client id and host, subscribed topics and assignment (topic ids and
names). A group this node has no share group of is GROUP_ID_NOT_FOUND.

Authorization (as Kafka): DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED; the group's
authorized operations when asked.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_operations
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._shares import share_groups
from pydmq.protocol.acl import GROUP_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.share_group_describe import (
    Assignment,
    DescribedGroup,
    Member,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    TopicPartitions,
)

__all__ = ["HANDLER"]

_NOT_REQUESTED = -(2**31)
ASSIGNOR_NAME = "simple"


def handle(ctx: BrokerContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    groups = share_groups(ctx).groups

    def assignment(parts: Mapping[uuid.UUID, Sequence[int]]) -> Assignment:
        topics = ctx.broker.topics
        return Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=tid, topic_name=info.name, partitions=sorted(ps))
                for tid, ps in sorted(parts.items())
                if (info := topics.by_id(tid)) is not None
            ]
        )

    response = ShareGroupDescribeResponse()
    for group_id in request.group_ids:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            response.groups.append(DescribedGroup(group_id=group_id, error_code=GROUP_DENIED))
            continue
        ops = (
            authorized_operations(ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if request.include_authorized_operations
            else _NOT_REQUESTED
        )
        group = groups.groups.get(group_id)
        if group is None:
            response.groups.append(
                DescribedGroup(
                    group_id=group_id,
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {group_id} not found.",
                    authorized_operations=ops,
                )
            )
            continue
        response.groups.append(
            DescribedGroup(
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=ASSIGNOR_NAME,
                authorized_operations=ops,
                members=[
                    Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=assignment(m.assignment),
                    )
                    for m in group.members.values()
                ],
            )
        )
    return response


HANDLER = ApiHandlerSpec(77, 1, 1, handle, "ShareGroupDescribe")
