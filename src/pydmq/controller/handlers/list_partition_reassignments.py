"""ListPartitionReassignments (key 46), v0, forwarded by brokers: ongoing reassignments.

Read-only, but answered by the active controller only, as one of its operations (no
records): its image is the committed truth, another voter's may lag. ``topics`` null lists every partition being reassigned.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import list_partition_reassignments
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        partitions = (
            None
            if request.topics is None
            else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        )
        ongoing, error, message = await run_operation(
            controller, lambda image: list_partition_reassignments(image, partitions)
        )
        if ongoing is None:
            return ListPartitionReassignmentsResponse(error_code=error, error_message=message)
        by_topic: dict[str, OngoingTopicReassignment] = {}
        for o in ongoing:
            topic = by_topic.get(o.topic)
            if topic is None:
                topic = by_topic[o.topic] = OngoingTopicReassignment(name=o.topic)
            topic.partitions.append(
                OngoingPartitionReassignment(
                    partition_index=o.partition_id,
                    replicas=list(o.replicas),
                    adding_replicas=list(o.adding_replicas),
                    removing_replicas=list(o.removing_replicas),
                )
            )
        return ListPartitionReassignmentsResponse(
            error_code=ErrorCode.NONE, topics=list(by_topic.values())
        )

    return ApiHandlerSpec(46, 0, 0, handle, "ListPartitionReassignments")
