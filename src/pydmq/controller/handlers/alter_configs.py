"""AlterConfigs (key 33), v0-v2, forwarded by brokers: replace a topic's explicit configs or
a BROKER resource's dynamic configs (the cluster default "" or a broker id)."""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController
from pydmq.controller.handlers._configs import answer_config_resources
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
                r.resource_type, r.resource_name, {c.name: c.value for c in r.configs}
            )
            for r in request.resources
        ]
        responses = await answer_config_resources(
            controller,
            request.resources,
            wanted,
            request.validate_only,
            alter_configs,
            AlterConfigsResourceResponse,
        )
        return AlterConfigsResponse(responses=responses)

    return ApiHandlerSpec(33, 0, 2, handle, "AlterConfigs")
