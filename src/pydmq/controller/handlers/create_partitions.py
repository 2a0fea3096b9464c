"""CreatePartitions (key 37), v0-v3, forwarded by brokers: grow topics to a new count."""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import CreatePartitionsTopic, create_partitions
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: CreatePartitionsRequest
    ) -> CreatePartitionsResponse:
        wanted = [
            CreatePartitionsTopic(
                name=t.name,
                count=t.count,
                assignments=(
                    None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
                ),
            )
            for t in request.topics
        ]
        results, error, message = await run_operation(
            controller,
            lambda image: create_partitions(
                image, controller.operation_context, wanted, validate_only=request.validate_only
            ),
        )
        if results is None:
            return CreatePartitionsResponse(
                results=[
                    CreatePartitionsTopicResult(
                        name=t.name, error_code=error, error_message=message
                    )
                    for t in request.topics
                ]
            )
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(
                    name=r.name, error_code=r.error_code, error_message=r.error_message
                )
                for r in results
            ]
        )

    return ApiHandlerSpec(37, 0, 3, handle, "CreatePartitions")
