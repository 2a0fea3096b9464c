"""Heartbeat (key 12), v0-v4.

Resets the member's session timer. Errors as Kafka: UNKNOWN_MEMBER_ID (unknown group or
member), FENCED_INSTANCE_ID (a replaced static member), ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member must rejoin).
Group instance id from v3. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the group is not
coordinated here / still loading (cluster mode).

Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED (as Kafka).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return HeartbeatResponse(error_code=GROUP_DENIED)
    error = coordinator(ctx).heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id if ctx.api_version >= 3 else None,
    )
    return HeartbeatResponse(error_code=error)


HANDLER = ApiHandlerSpec(12, 0, 4, handle, "Heartbeat")
