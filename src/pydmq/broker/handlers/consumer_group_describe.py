"""ConsumerGroupDescribe (key 69), v0-v1: KIP-848 consumer groups as Kafka 4 describes them.

Per group: state (Empty, Assigning, Reconciling, Stable), group epoch, target assignment
epoch, the assignor in use, and each member's epoch, subscription, current assignment and
target assignment (topic ids and names). An unknown group is GROUP_ID_NOT_FOUND "Group <id>
not found."; a classic group GROUP_ID_NOT_FOUND "Group <id> is not a consumer group." (the
Java admin then falls back to DescribeGroups). Authorized operations when asked (no
authorizer: every group operation). Version notes: v1 adds ``member_type`` (1 = consumer
protocol). A group not coordinated here: NOT_COORDINATOR; still loading:
COORDINATOR_LOAD_IN_PROGRESS.

Authorization (as Kafka): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_operations
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.groups.consumer.group import Partitions
from pydmq.protocol.acl import GROUP_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.consumer_group_describe import (
    Assignment,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
    Member,
    TopicPartitions,
)

__all__ = ["HANDLER"]

_NOT_REQUESTED = -(2**31)
_CONSUMER_MEMBER = 1


def handle(
    ctx: BrokerContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    groups = coordinator(ctx)
    consumer = groups.consumer

    def assignment(parts: Partitions) -> Assignment:
        return Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=tid, topic_name=name, partitions=ps)
                for tid, name, ps in consumer.topic_names(parts)
            ]
        )

    response = ConsumerGroupDescribeResponse()
    for group_id in request.group_ids:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            response.groups.append(DescribedGroup(group_id=group_id, error_code=GROUP_DENIED))
            continue
        ops = (
            authorized_operations(ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if request.include_authorized_operations
            else _NOT_REQUESTED
        )
        error = groups.ownership_error(group_id)
        if error:
            response.groups.append(DescribedGroup(group_id=group_id, error_code=error))
            continue
        group = groups.consumer_group(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if groups.has_classic_group(group_id)
                else f"Group {group_id} not found."
            )
            response.groups.append(
                DescribedGroup(
                    group_id=group_id,
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=message,
                    authorized_operations=ops,
                )
            )
            continue
        response.groups.append(
            DescribedGroup(
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=consumer.assignor_for(group),
                authorized_operations=ops,
                members=[
                    Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.reported_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=assignment(m.assigned),
                        target_assignment=assignment(group.target.get(m.member_id, {})),
                        member_type=_CONSUMER_MEMBER,
                    )
                    for m in group.members.values()
                ],
            )
        )
    return response


HANDLER = ApiHandlerSpec(69, 0, 1, handle, "ConsumerGroupDescribe")
