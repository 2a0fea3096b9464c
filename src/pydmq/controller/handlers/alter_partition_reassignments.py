"""AlterPartitionReassignments (key 45), v0-v1, forwarded by brokers.

Start, replace (``replicas`` set) or cancel (``replicas`` null) reassignments; the operation
records adding/removing replicas, and the reassignment completes when the new replicas join
the ISR (AlterPartition). v1 (KIP-860): unless ``allow_replication_factor_change``, a target
with a different replica count than the partition's is refused with
INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import (
    ControllerResult,
    ReassignmentRequest,
    ReassignmentResult,
    alter_partition_reassignments,
)
from pydmq.metadata.image import MetadataImage
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

__all__ = ["make_handler"]


def _refuse_rf_changes(
    image: MetadataImage, wanted: list[ReassignmentRequest]
) -> tuple[list[ReassignmentRequest], list[ReassignmentResult]]:
    keep: list[ReassignmentRequest] = []
    refused: list[ReassignmentResult] = []
    for req in wanted:
        topic = image.topics.by_name.get(req.topic)
        p = topic.partitions.get(req.partition_id) if topic is not None else None
        if p is not None and req.replicas is not None:
            current = [r for r in p.replicas if r not in p.adding_replicas]
            if len(req.replicas) != len(current):
                refused.append(
                    ReassignmentResult(
                        req.topic,
                        req.partition_id,
                        ErrorCode.INVALID_REPLICATION_FACTOR,
                        "The replication factor is changed but "
                        "allow_replication_factor_change is false.",
                    )
                )
                continue
        keep.append(req)
    return keep, refused


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        wanted = [
            ReassignmentRequest(
                t.name, p.partition_index, None if p.replicas is None else list(p.replicas)
            )
            for t in request.topics
            for p in t.partitions
        ]
        check_rf = ctx.api_version >= 1 and not request.allow_replication_factor_change

        def operation(image: MetadataImage) -> ControllerResult[list[ReassignmentResult]]:
            todo, refused = _refuse_rf_changes(image, wanted) if check_rf else (wanted, [])
            result = alter_partition_reassignments(image, controller.operation_context, todo)
            return ControllerResult(result.records, refused + result.response)

        results, error, message = await run_operation(controller, operation)
        response = AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=request.allow_replication_factor_change
        )
        if results is None:
            response.error_code = error
            response.error_message = message
            return response
        by_topic: dict[str, ReassignableTopicResponse] = {}
        order = {(r.topic, r.partition_id): i for i, r in enumerate(wanted)}
        for r in sorted(results, key=lambda r: order.get((r.topic, r.partition_id), 0)):
            topic = by_topic.get(r.topic)
            if topic is None:
                topic = by_topic[r.topic] = ReassignableTopicResponse(name=r.topic)
            topic.partitions.append(
                ReassignablePartitionResponse(
                    partition_index=r.partition_id,
                    error_code=r.error_code,
                    error_message=r.error_message,
                )
            )
        response.responses = list(by_topic.values())
        return response

    return ApiHandlerSpec(45, 0, 1, handle, "AlterPartitionReassignments")
