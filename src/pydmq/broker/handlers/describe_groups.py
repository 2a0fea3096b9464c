"""DescribeGroups (key 15), v0-v6.

State, protocol type and members of each group. As Kafka: a Stable group reports its protocol
and each member's metadata and assignment; other states report the members without them and
protocol "". An unknown group is reported as state "Dead": with no error before v6, from v6
(KIP-1043) with GROUP_ID_NOT_FOUND and "Group <id> not found.". Authorized operations from v3 (no authorizer: every group operation when
asked, else Kafka's "not requested" sentinel); group instance ids from v4. Per group NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when it is
not coordinated here / still loading (cluster mode).

Authorization (as Kafka): DESCRIBE on each group, else that group is answered
GROUP_AUTHORIZATION_FAILED with nothing else.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_operations
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.groups.classic.group import GroupState
from pydmq.protocol.acl import GROUP_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_groups import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)

__all__ = ["HANDLER"]

_NOT_REQUESTED = -(2**31)
# READ (3), DELETE (6), DESCRIBE (8): the ACL operations that apply to a group


def handle(ctx: BrokerContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    group_coordinator = coordinator(ctx)
    response = DescribeGroupsResponse()
    for group_id in request.groups:
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            response.groups.append(DescribedGroup(error_code=GROUP_DENIED, group_id=group_id))
            continue
        ops = (
            authorized_operations(ctx, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            if request.include_authorized_operations
            else _NOT_REQUESTED
        )
        error, summary = group_coordinator.describe_group(group_id)
        message = None
        if ctx.api_version >= 6 and not error and summary.state == GroupState.DEAD.value:
            error, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        response.groups.append(
            DescribedGroup(
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                authorized_operations=ops,
                members=[
                    DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
            )
        )
    return response


HANDLER = ApiHandlerSpec(15, 0, 6, handle, "DescribeGroups")
