"""LeaveGroup (key 13), v0-v5.

Removes members and rebalances the rest. v0-v2: one ``member_id``, the error is top-level.
v3+: a batch of member identities (member id and/or group instance id: an empty member id with
an instance id removes that static member) with one error per member (UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID). ``reason`` (v5) is logged only. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (top level) when
the group is not coordinated here / still loading (cluster mode).

Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED (as Kafka).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.leave_group import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberResponse,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return LeaveGroupResponse(error_code=GROUP_DENIED)
    if ctx.api_version < 3:
        top, errors = coordinator(ctx).leave_group(request.group_id, [(request.member_id, None)])
        return LeaveGroupResponse(error_code=top or (errors[0] if errors else 0))
    identities = [(m.member_id, m.group_instance_id) for m in request.members]
    top, errors = coordinator(ctx).leave_group(request.group_id, identities)
    if top:
        return LeaveGroupResponse(error_code=top)
    return LeaveGroupResponse(
        members=[
            MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for (m, i), e in zip(identities, errors, strict=True)
        ]
    )


HANDLER = ApiHandlerSpec(13, 0, 5, handle, "LeaveGroup")
