"""IncrementalAlterConfigs (key 44), v0-v1, forwarded by brokers: edit topic configs.

SET / DELETE / APPEND / SUBTRACT per config, as ConfigRecords; brokers learn the result
through UpdateMetadata's topic ``configs``. Only topic resources are controller business.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import IncrementalAlterConfigsResource, incremental_alter_configs
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        wanted = [
            IncrementalAlterConfigsResource(
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                operations=[(c.name, c.config_operation, c.value) for c in r.configs],
            )
            for r in request.resources
        ]
        results, error, message = await run_operation(
            controller,
            lambda image: incremental_alter_configs(
                image, controller.operation_context, wanted, validate_only=request.validate_only
            ),
        )
        if results is None:
            return IncrementalAlterConfigsResponse(
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
        return IncrementalAlterConfigsResponse(
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

    return ApiHandlerSpec(44, 0, 1, handle, "IncrementalAlterConfigs")
