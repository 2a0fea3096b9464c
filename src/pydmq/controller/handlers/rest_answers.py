"""The REST admin API's Idempotency-Key answers on the controller
(:mod:`pydmq.controller.operations.rest_answers`): DescribeConfigs (key 32), v4, reads them;
IncrementalAlterConfigs keeps them (:mod:`.incremental_alter_configs` hands this module its
resources of :data:`REST_ANSWER_RESOURCE`).

Only brokers send these (their REST admin API, as their own requests): the controller
describes no other config resource (INVALID_REQUEST), the brokers answer clients'
DescribeConfigs themselves.
"""

from __future__ import annotations

import time
from functools import partial

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations.rest_answers import (
    REST_ANSWER_RESOURCE,
    answer_configs,
    answer_of_configs,
    describe_rest_answer,
    keep_rest_answer,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
)

__all__ = ["keep_answers", "make_handler"]

_DYNAMIC = 1  # the config source of what the controller keeps


async def keep_answers(
    controller: AdminController, resources: list[AlterConfigsResource]
) -> list[AlterConfigsResourceResponse]:
    """Keep each resource's answer (IncrementalAlterConfigs of REST answers);
    DUPLICATE_RESOURCE when another answer was kept for its key first."""
    out = []
    for resource in resources:
        configs = {c.name: c.value for c in resource.configs}
        code: int
        message: str | None
        try:
            answer = answer_of_configs(resource.resource_name, configs)
        except ValueError as exc:
            code, message = ErrorCode.INVALID_CONFIG, str(exc)
        else:
            kept, code, message = await run_operation(
                controller, partial(keep_rest_answer, answer=answer)
            )
            if code == ErrorCode.NONE and kept != answer:
                code, message = ErrorCode.DUPLICATE_RESOURCE, "another answer has this key"
        out.append(
            AlterConfigsResourceResponse(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return out


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: DescribeConfigsRequest
    ) -> DescribeConfigsResponse:
        results = []
        for resource in request.resources:
            result = DescribeConfigsResult(
                error_code=ErrorCode.NONE,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[],
            )
            results.append(result)
            if resource.resource_type != REST_ANSWER_RESOURCE:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = "the controller describes only pydmq's REST answers"
                continue
            key, now_ms = resource.resource_name, int(time.time() * 1000)
            kept, code, message = await run_operation(
                controller, partial(describe_rest_answer, key=key, now_ms=now_ms)
            )
            if code != ErrorCode.NONE:
                result.error_code, result.error_message = code, message
            elif kept is None:
                result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            else:
                result.configs = [
                    DescribeConfigsResourceResult(
                        name=name,
                        value=value,
                        read_only=True,
                        config_source=_DYNAMIC,
                        is_sensitive=False,
                        synonyms=[],
                    )
                    for name, value in answer_configs(kept).items()
                ]
        return DescribeConfigsResponse(results=results)

    return ApiHandlerSpec(32, 4, 4, handle, "DescribeConfigs")
