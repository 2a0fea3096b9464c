"""AlterPartitionReassignments (key 45), v0-v1.

The controller adds the target replicas, lets them catch up and then removes the others
(KIP-455); on a single node the only possible target is the node itself (any other broker:
INVALID_REPLICA_ASSIGNMENT), and cancelling (null replicas) answers
NO_REASSIGNMENT_IN_PROGRESS; an unknown partition UNKNOWN_TOPIC_OR_PARTITION.

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT when none answers; a single node's own, in process, whose one replica
already leads every partition).

Authorization (as Kafka): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

__all__ = ["HANDLER"]


def _response(
    request: AlterPartitionReassignmentsRequest,
    result_of: Callable[[str, int, list[int] | None], tuple[int, str | None]],
) -> AlterPartitionReassignmentsResponse:
    response = AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE,
        allow_replication_factor_change=request.allow_replication_factor_change,
    )
    for topic in request.topics:
        topic_response = ReassignableTopicResponse(name=topic.name)
        response.responses.append(topic_response)
        for p in topic.partitions:
            code, message = result_of(topic.name, p.partition_index, p.replicas)
            topic_response.partitions.append(
                ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message
                )
            )
    return response


def handle(
    ctx: BrokerContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse | Awaitable[AlterPartitionReassignmentsResponse]:
    def unavailable(code: int, message: str | None) -> AlterPartitionReassignmentsResponse:
        return _response(request, lambda _t, _i, _r: (code, message))

    if not authorized_cluster(ctx, AclOperation.ALTER):
        denied = unavailable(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        denied.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return denied
    return forward_to_controller(ctx, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(45, 0, 1, handle, "AlterPartitionReassignments")
