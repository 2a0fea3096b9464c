"""ListPartitionReassignments (key 46), v0, forwarded by brokers: ongoing reassignments.

Read-only, but answered by the active controller only: its image is the committed truth,
another voter's may lag. ``topics`` null lists every partition being reassigned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import error_message
from pydmq.controller.operations import list_partition_reassignments
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    def handle(
        ctx: RequestContext[object], request: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        if not runtime.is_active:
            return ListPartitionReassignmentsResponse(
                error_code=ErrorCode.NOT_CONTROLLER,
                error_message=error_message(ErrorCode.NOT_CONTROLLER),
            )
        partitions = (
            None
            if request.topics is None
            else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        )
        ongoing = list_partition_reassignments(runtime.image, partitions).response
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
