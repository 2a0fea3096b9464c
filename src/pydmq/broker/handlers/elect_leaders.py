"""ElectLeaders (key 43), v0-v2.

Cluster mode: forwarded to the active controller, which runs preferred (0) or unclean (1)
elections through the topic's replication strategy. Single-node mode: every partition has one
replica that already leads it, so a listed partition gets ELECTION_NOT_NEEDED (Kafka's answer
when the preferred leader already leads) and an unknown one UNKNOWN_TOPIC_OR_PARTITION; a null
list (all partitions) has nothing to elect and answers empty. ``election_type`` must be 0 or 1
(v1+; INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

__all__ = ["HANDLER"]


def _per_partition(
    request: ElectLeadersRequest, code: int, message: str | None
) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        error_code=ErrorCode.NONE,
        replica_election_results=[
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code, error_message=message)
                    for p in t.partitions
                ],
            )
            for t in request.topic_partitions or []
        ],
    )


def _handle_local(ctx: BrokerContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    if ctx.api_version >= 1 and request.election_type not in (0, 1):
        return _per_partition(
            request, ErrorCode.INVALID_REQUEST, f"unknown election type {request.election_type}"
        )
    response = ElectLeadersResponse(error_code=ErrorCode.NONE)
    for wanted in request.topic_partitions or []:
        topic = ctx.broker.topics.get(wanted.topic)
        indexes = set() if topic is None else {p.index for p in topic.partitions}
        result = ReplicaElectionResult(topic=wanted.topic)
        response.replica_election_results.append(result)
        for index in wanted.partitions:
            if index in indexes:
                result.partition_result.append(
                    PartitionResult(
                        partition_id=index,
                        error_code=ErrorCode.ELECTION_NOT_NEEDED,
                        error_message="Leader election not needed for topic partition.",
                    )
                )
            else:
                result.partition_result.append(
                    PartitionResult(
                        partition_id=index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message="The partition does not exist.",
                    )
                )
    return response


def handle(
    ctx: BrokerContext, request: ElectLeadersRequest
) -> ElectLeadersResponse | Awaitable[ElectLeadersResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return _handle_local(ctx, request)
    return forward_to_controller(
        ctx,
        cluster,
        request,
        lambda code, message: _per_partition(request, code, message),
        request.timeout,
    )


HANDLER = ApiHandlerSpec(43, 0, 2, handle, "ElectLeaders")
