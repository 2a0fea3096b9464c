"""ListPartitionReassignments (key 46), v0.

The controller knows the ongoing reassignments (adding/removing replicas); on a single node
none can be in progress, so the answer lists nothing.

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT when none answers; a single node's own, in process, whose one replica
already leads every partition).

Authorization (as Kafka): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse | Awaitable[ListPartitionReassignmentsResponse]:
    if not authorized_cluster(ctx, AclOperation.DESCRIBE):
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return forward_to_controller(
        ctx,
        request,
        lambda code, message: ListPartitionReassignmentsResponse(
            error_code=code, error_message=message
        ),
        request.timeout,
    )


HANDLER = ApiHandlerSpec(46, 0, 0, handle, "ListPartitionReassignments")
