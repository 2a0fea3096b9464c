"""AllocateProducerIds (key 67), v0: a broker takes the next block of producer ids.

The block is a ProducerIdsRecord in the metadata log, so no two brokers (nor a restarted
controller) ever hand out the same id.

Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(:mod:`pydmq.controller.handlers._authorize`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.controller.handlers._common import run_operation
from pydmq.controller.operations import ProducerIdsBlock, allocate_producer_ids
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AllocateProducerIdsRequest
    ) -> AllocateProducerIdsResponse:
        if cluster_action_denied(runtime.authorizer, ctx):
            return AllocateProducerIdsResponse(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id_start=-1
            )
        reply, error, _ = await run_operation(
            runtime,
            lambda image: allocate_producer_ids(
                image,
                runtime.operation_context,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
            ),
        )
        if reply is None:
            return AllocateProducerIdsResponse(error_code=error, producer_id_start=-1)
        assert isinstance(reply, ProducerIdsBlock)
        return AllocateProducerIdsResponse(
            error_code=reply.error_code,
            producer_id_start=reply.producer_id_start,
            producer_id_len=reply.producer_id_len,
        )

    return ApiHandlerSpec(67, 0, 0, handle, "AllocateProducerIds")
