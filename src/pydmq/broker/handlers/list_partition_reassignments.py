"""ListPartitionReassignments (key 46), v0.

Cluster mode: forwarded to the active controller, which knows the ongoing reassignments
(adding/removing replicas). Single-node mode: no reassignment can be in progress, so the
answer lists nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse | Awaitable[ListPartitionReassignmentsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE)
    return forward_to_controller(
        ctx,
        cluster,
        request,
        lambda code, message: ListPartitionReassignmentsResponse(
            error_code=code, error_message=message
        ),
        request.timeout,
    )


HANDLER = ApiHandlerSpec(46, 0, 0, handle, "ListPartitionReassignments")
