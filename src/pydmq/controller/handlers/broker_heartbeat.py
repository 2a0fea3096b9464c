"""BrokerHeartbeat (key 63), v0-v2: a registered broker is alive and says how far it got.

The heartbeat is noted first (it is what keeps the broker from being fenced), then the
broker state machine of :func:`~pydmq.controller.operations.broker_heartbeat` runs: unfence
once ``current_metadata_offset`` reached the registration, fence on ``want_fence``, controlled
shutdown on ``want_shut_down``. Non-active controllers answer NOT_CONTROLLER.

Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(:mod:`pydmq.controller.handlers._authorize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.controller.handlers._common import run_operation
from pydmq.controller.operations import BrokerHeartbeatReply, broker_heartbeat
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.broker_heartbeat import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: BrokerHeartbeatRequest
    ) -> BrokerHeartbeatResponse:
        if cluster_action_denied(runtime.authorizer, ctx):
            return BrokerHeartbeatResponse(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, is_fenced=True
            )
        if not runtime.is_active:
            return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER, is_fenced=True)
        runtime.record_heartbeat(request.broker_id, request.broker_epoch, ctx.connection_id)
        reply, error, _ = await run_operation(
            runtime,
            lambda image: broker_heartbeat(
                image,
                runtime.operation_context,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                current_metadata_offset=request.current_metadata_offset,
                want_fence=request.want_fence,
                want_shut_down=request.want_shut_down,
            ),
        )
        if reply is None:
            return BrokerHeartbeatResponse(error_code=error, is_fenced=True)
        assert isinstance(reply, BrokerHeartbeatReply)
        return BrokerHeartbeatResponse(
            error_code=reply.error_code,
            is_caught_up=reply.is_caught_up,
            is_fenced=reply.is_fenced,
            should_shut_down=reply.should_shut_down,
        )

    return ApiHandlerSpec(63, 0, 2, handle, "BrokerHeartbeat")
