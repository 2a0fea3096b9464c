"""BrokerRegistration (key 62), v0-v4: a broker joins the cluster (fenced at first).

Only the active controller registers (others answer NOT_CONTROLLER, so the broker tries the
next voter). A registration writes RegisterBrokerRecord(fenced=True) with a new broker epoch;
the channel manager then pushes the broker its FULL state, and a heartbeat showing it caught up
unfences it. The broker's listeners become its endpoints (``security_protocol`` as sent).
A broker of another cluster (``cluster_id`` differs) gets INCONSISTENT_CLUSTER_ID.

Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(:mod:`pydmq.controller.handlers._authorize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.controller.handlers._common import run_operation
from pydmq.controller.operations import BrokerRegistrationReply, register_broker
from pydmq.metadata.records import Endpoint
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: BrokerRegistrationRequest
    ) -> BrokerRegistrationResponse:
        if cluster_action_denied(runtime.authorizer, ctx):
            return BrokerRegistrationResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if request.broker_id < 0:
            return BrokerRegistrationResponse(error_code=ErrorCode.INVALID_REQUEST)
        if runtime.is_active and request.cluster_id != runtime.cluster_id:
            return BrokerRegistrationResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        endpoints = tuple(
            Endpoint(ln.name, ln.host, ln.port, ln.security_protocol) for ln in request.listeners
        )
        reply, error, _ = await run_operation(
            runtime,
            lambda image: register_broker(
                image,
                runtime.operation_context,
                broker_id=request.broker_id,
                incarnation_id=request.incarnation_id,
                endpoints=endpoints,
                rack=request.rack,
            ),
        )
        if reply is None:
            return BrokerRegistrationResponse(error_code=error)
        assert isinstance(reply, BrokerRegistrationReply)
        if reply.error_code == ErrorCode.NONE:
            runtime.record_heartbeat(request.broker_id, reply.broker_epoch)
        return BrokerRegistrationResponse(
            error_code=reply.error_code, broker_epoch=reply.broker_epoch
        )

    return ApiHandlerSpec(62, 0, 4, handle, "BrokerRegistration")
