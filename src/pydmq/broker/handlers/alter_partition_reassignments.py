"""AlterPartitionReassignments (key 45), v0-v1.

Cluster mode: forwarded to the active controller, which adds the target replicas, lets them
catch up and then removes the others (KIP-455). Single-node mode: the only possible assignment
is this broker, so reassigning to ``[node id]`` succeeds without change, any other target gets
INVALID_REPLICA_ASSIGNMENT, cancelling (null replicas) NO_REASSIGNMENT_IN_PROGRESS, and an
unknown partition UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

__all__ = ["HANDLER"]


def _local_result(
    ctx: BrokerContext, topic: str, index: int, replicas: list[int] | None
) -> tuple[int, str | None]:
    info = ctx.broker.topics.get(topic)
    if info is None or index not in {p.index for p in info.partitions}:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No ongoing reassignment for this partition."
    node = ctx.broker.node_id
    if replicas != [node]:
        unknown = [r for r in replicas if r != node]
        if unknown:
            return (
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {unknown[0]}, but no broker "
                "with that id is registered.",
            )
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment"
    return ErrorCode.NONE, None


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
    cluster = ctx.broker.cluster
    if cluster is None:
        return _response(request, lambda t, i, r: _local_result(ctx, t, i, r))

    def unavailable(code: int, message: str) -> AlterPartitionReassignmentsResponse:
        return _response(request, lambda _t, _i, _r: (code, message))

    return forward_to_controller(ctx, cluster, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(45, 0, 1, handle, "AlterPartitionReassignments")
