"""ElectLeaders (key 43), v0-v2, forwarded by brokers: preferred or unclean elections.

v0 is always PREFERRED (0); v1+ carry ``election_type`` (1 = UNCLEAN). ``topic_partitions``
null means every partition (then only partitions where an election was attempted are
reported, as Kafka). The top-level error code exists from v1. ELECTION_NOT_NEEDED carries
Kafka's text "Leader election not needed for topic partition.".
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import ELECTION_PREFERRED, ELECTION_UNCLEAN, elect_leaders
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

__all__ = ["make_handler"]

# Kafka answers an error the controller gives without a message with the error's own text.
_DEFAULT_MESSAGES: dict[int, str] = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
}


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: ElectLeadersRequest
    ) -> ElectLeadersResponse:
        election_type = request.election_type if ctx.api_version >= 1 else ELECTION_PREFERRED
        partitions = (
            None
            if request.topic_partitions is None
            else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        )
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            return _all_failed(
                ctx, partitions, ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}"
            )
        results, error, message = await run_operation(
            controller,
            lambda image: elect_leaders(
                image,
                controller.operation_context,
                election_type=election_type,
                partitions=partitions,
            ),
        )
        if results is None:
            return _all_failed(ctx, partitions, error, message)
        by_topic: dict[str, ReplicaElectionResult] = {}
        for r in results:
            topic = by_topic.get(r.topic)
            if topic is None:
                topic = by_topic[r.topic] = ReplicaElectionResult(topic=r.topic)
            topic.partition_result.append(
                PartitionResult(
                    partition_id=r.partition_id,
                    error_code=r.error_code,
                    error_message=r.error_message or _DEFAULT_MESSAGES.get(r.error_code),
                )
            )
        return ElectLeadersResponse(
            error_code=ErrorCode.NONE, replica_election_results=list(by_topic.values())
        )

    return ApiHandlerSpec(43, 0, 2, handle, "ElectLeaders")


def _all_failed(
    ctx: RequestContext[object],
    partitions: list[tuple[str, int]] | None,
    error: int,
    message: str | None,
) -> ElectLeadersResponse:
    response = ElectLeadersResponse(error_code=error if ctx.api_version >= 1 else 0)
    by_topic: dict[str, ReplicaElectionResult] = {}
    for topic, pid in partitions or []:
        entry = by_topic.setdefault(topic, ReplicaElectionResult(topic=topic))
        entry.partition_result.append(
            PartitionResult(partition_id=pid, error_code=error, error_message=message)
        )
    response.replica_election_results = list(by_topic.values())
    return response
