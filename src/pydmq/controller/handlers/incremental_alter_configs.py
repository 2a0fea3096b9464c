"""IncrementalAlterConfigs (key 44), v0-v1, forwarded by brokers: edit topic configs and
dynamic broker configs.

SET / DELETE / APPEND / SUBTRACT per config, as ConfigRecords; brokers learn the result
through UpdateMetadata's topic ``configs`` and ``broker_configs``. TOPIC and BROKER resources
(the cluster default "" or a broker id; the forwarding broker checked that the id is its own)
are controller business; pydmq's REST answers (:mod:`.rest_answers`) are kept; others are
refused (INVALID_REQUEST).
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController
from pydmq.controller.handlers._configs import answer_config_resources
from pydmq.controller.handlers.rest_answers import keep_answers
from pydmq.controller.operations import IncrementalAlterConfigsResource, incremental_alter_configs
from pydmq.controller.operations.rest_answers import REST_ANSWER_RESOURCE
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
        answers = [r for r in request.resources if r.resource_type == REST_ANSWER_RESOURCE]
        configs = [r for r in request.resources if r.resource_type != REST_ANSWER_RESOURCE]
        wanted = [
            IncrementalAlterConfigsResource(
                r.resource_type,
                r.resource_name,
                [(c.name, c.config_operation, c.value) for c in r.configs],
            )
            for r in configs
        ]
        responses = await answer_config_resources(
            controller,
            configs,
            wanted,
            request.validate_only,
            incremental_alter_configs,
            AlterConfigsResourceResponse,
        )
        if answers and not request.validate_only:
            kept = iter(await keep_answers(controller, answers))
            others = iter(responses)
            responses = [
                next(kept) if r.resource_type == REST_ANSWER_RESOURCE else next(others)
                for r in request.resources
            ]
        return IncrementalAlterConfigsResponse(responses=responses)

    return ApiHandlerSpec(44, 0, 1, handle, "IncrementalAlterConfigs")
