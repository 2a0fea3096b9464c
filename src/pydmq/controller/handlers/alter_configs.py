"""AlterConfigs (key 33), v0-v2, forwarded by brokers: replace a topic's explicit configs or
a BROKER resource's dynamic configs (the cluster default "" or a broker id)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import error_message, run_operation
from pydmq.controller.operations import AlterConfigsResource, alter_configs
from pydmq.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
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
        results, error, _ = await run_operation(
            runtime,
            lambda image: alter_configs(
                image, runtime.operation_context, wanted, validate_only=request.validate_only
            ),
        )
        if results is None:
            return AlterConfigsResponse(
                responses=[
                    AlterConfigsResourceResponse(
                        error_code=error,
                        error_message=error_message(error),
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
