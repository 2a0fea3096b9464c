"""ControlledShutdown (key 7), v3 (pydmq's own schema): a stopping broker asks to be drained.

The controller marks the broker in controlled shutdown and moves its leaderships away (records);
the answer lists the partitions it still leads. The broker repeats until that list is empty
(or its shutdown timeout passes), then stops.

Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(:mod:`pydmq.controller.handlers._authorize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.controller.handlers._common import run_operation
from pydmq.controller.operations import ControlledShutdownReply, controlled_shutdown
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartition,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: ControlledShutdownRequest
    ) -> ControlledShutdownResponse:
        if cluster_action_denied(runtime.authorizer, ctx):
            return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        reply, error, _ = await run_operation(
            runtime,
            lambda image: controlled_shutdown(
                image,
                runtime.operation_context,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
            ),
        )
        if reply is None:
            return ControlledShutdownResponse(error_code=error)
        assert isinstance(reply, ControlledShutdownReply)
        return ControlledShutdownResponse(
            error_code=reply.error_code,
            remaining_partitions=[
                RemainingPartition(topic_name=name, partition_index=pid)
                for name, pid in reply.remaining_partitions
            ],
        )

    return ApiHandlerSpec(7, 3, 3, handle, "ControlledShutdown")
