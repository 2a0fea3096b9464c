"""IncrementalAlterConfigs (key 44), v0-v1, forwarded by brokers: edit topic configs and
dynamic broker configs.

SET / DELETE / APPEND / SUBTRACT per config, as ConfigRecords; brokers learn the result
through UpdateMetadata's topic ``configs`` and ``broker_configs``. TOPIC and BROKER resources
(the cluster default "" or a broker id; the forwarding broker checked that the id is its own)
are controller business; others are refused (INVALID_REQUEST).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController
from pydmq.controller.handlers._configs import answer_config_resources
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
                r.resource_type,
                r.resource_name,
                [(c.name, c.config_operation, c.value) for c in r.configs],
            )
            for r in request.resources
        ]
        responses = await answer_config_resources(
            controller,
            request.resources,
            wanted,
            request.validate_only,
            incremental_alter_configs,
            AlterConfigsResourceResponse,
        )
        return IncrementalAlterConfigsResponse(responses=responses)

    return ApiHandlerSpec(44, 0, 1, handle, "IncrementalAlterConfigs")
