"""IncrementalAlterConfigs (key 44), v0-v1, forwarded by brokers: edit topic configs and
dynamic broker configs.

SET / DELETE / APPEND / SUBTRACT per config, as ConfigRecords; brokers learn the result
through UpdateMetadata's topic ``configs`` and ``broker_configs``. TOPIC and BROKER resources
(the cluster default "" or a broker id; the forwarding broker checked that the id is its own)
are controller business; others are refused (INVALID_REQUEST).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import error_message, run_operation
from pydmq.controller.operations import IncrementalAlterConfigsResource, incremental_alter_configs
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
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
        results, error, _ = await run_operation(
            runtime,
            lambda image: incremental_alter_configs(
                image, runtime.operation_context, wanted, validate_only=request.validate_only
            ),
        )
        if results is None:
            return IncrementalAlterConfigsResponse(
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
