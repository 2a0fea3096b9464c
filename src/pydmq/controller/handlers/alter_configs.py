"""AlterConfigs (key 33), v0-v2, forwarded by brokers: replace a topic's explicit configs."""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import AlterConfigsResource, alter_configs
from pydmq.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AlterConfigsRequest
    ) -> AlterConfigsResponse:
        wanted = [
            AlterConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs={c.name: c.value for c in r.configs},
            )
            for r in request.resources
        ]
        results, error, message = await run_operation(
            controller,
            lambda image: alter_configs(
                image, controller.operation_context, wanted, validate_only=request.validate_only
            ),
        )
        if results is None:
            return AlterConfigsResponse(
                responses=[
                    AlterConfigsResourceResponse(
                        error_code=error,
                        error_message=message,
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                    )
                    for r in request.resources
                ]
            )
        return AlterConfigsResponse(
            responses=[
                AlterConfigsResourceResponse(
                    error_code=r.error_code,
                    error_message=r.error_message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in results
            ]
        )

    return ApiHandlerSpec(33, 0, 2, handle, "AlterConfigs")
