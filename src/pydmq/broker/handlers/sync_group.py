"""SyncGroup (key 14), v0-v5.

The leader's assignments complete the rebalance; every member's response waits for them
(asynchronously). Assignments sent by a non-leader are ignored, as Kafka does. Group instance
id from v3; protocol type and name from v5 (checked against the group's:
INCONSISTENT_GROUP_PROTOCOL, and echoed in the response). Cluster mode: NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS when the group is not coordinated here / still loading; the
assignment is handed out once the group record is committed (acks=-1).

Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED (as Kafka).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

__all__ = ["HANDLER"]


async def _sync(ctx: BrokerContext, request: SyncGroupRequest) -> SyncGroupResponse:
    version = ctx.api_version
    result = await coordinator(ctx).sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if version >= 3 else None,
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {a.member_id: a.assignment for a in request.assignments},
    )
    return SyncGroupResponse(
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle(ctx: BrokerContext, request: SyncGroupRequest) -> object:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return SyncGroupResponse(error_code=GROUP_DENIED)
    return _sync(ctx, request)


HANDLER = ApiHandlerSpec(14, 0, 5, handle, "SyncGroup")
