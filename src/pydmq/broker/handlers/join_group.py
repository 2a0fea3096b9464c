"""JoinGroup (key 11), v0-v9.

Classic protocol, served by :class:`~pydmq.groups.coordinator.GroupCoordinator`; the response
waits (asynchronously) until the rebalance completes. Version notes: rebalance timeout from
v1 (v0: the session timeout); v4+ requires a known member id (KIP-394: a new member is answered
MEMBER_ID_REQUIRED with its id and joins again; v0-v3 join in one round trip); group instance
id (static membership) from v5; protocol name nullable and protocol type in the response from
v7; ``reason`` (v8) is logged only; ``skip_assignment`` (v9) is always false. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the
group is not coordinated here / still loading (cluster mode).

Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED (as Kafka).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.groups.api import JoinRequest
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.join_group import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
)

__all__ = ["HANDLER"]


async def _join(ctx: BrokerContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    result = await coordinator(ctx).join_group(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if version >= 5 else None,
            require_known_member_id=version >= 4,
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client_host}",
            rebalance_timeout_ms=(
                request.rebalance_timeout if version >= 1 else request.session_timeout
            ),
            session_timeout_ms=request.session_timeout,
            protocol_type=request.protocol_type,
            protocols=[(p.name, p.metadata) for p in request.protocols],
        )
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=meta)
            for m, i, meta in result.members
        ],
    )


def handle(ctx: BrokerContext, request: JoinGroupRequest) -> object:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return JoinGroupResponse(error_code=GROUP_DENIED, generation_id=-1)
    return _join(ctx, request)


HANDLER = ApiHandlerSpec(11, 0, 9, handle, "JoinGroup")
