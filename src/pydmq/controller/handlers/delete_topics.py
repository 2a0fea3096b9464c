"""DeleteTopics (key 20), v1-v6, forwarded by brokers to the active controller.

Topics by name (v1-v5 ``topic_names``, v6 ``topics[].name``) or by id (v6). One
RemoveTopicRecord per topic; the channel manager then tells every replica to stop and delete
it (StopReplica) and every broker to forget it (UpdateMetadata).
"""

from __future__ import annotations

import uuid

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import delete_topics
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

__all__ = ["make_handler"]

_ZERO = uuid.UUID(int=0)


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: DeleteTopicsRequest
    ) -> DeleteTopicsResponse:
        refs: list[str | uuid.UUID] = []
        invalid: list[DeletableTopicResult] = []
        if ctx.api_version >= 6:
            for state in request.topics:
                if state.name is not None and state.topic_id == _ZERO:
                    refs.append(state.name)
                elif state.name is None and state.topic_id != _ZERO:
                    refs.append(state.topic_id)
                else:
                    invalid.append(
                        DeletableTopicResult(
                            name=state.name,
                            topic_id=state.topic_id,
                            error_code=ErrorCode.INVALID_REQUEST,
                            error_message="Name or topic id, exactly one, must be set.",
                        )
                    )
        else:
            refs.extend(request.topic_names)
        results, error, message = await run_operation(
            controller, lambda image: delete_topics(image, controller.operation_context, refs)
        )
        response = DeleteTopicsResponse(responses=list(invalid))
        if results is None:
            for ref in refs:
                response.responses.append(
                    DeletableTopicResult(
                        name=ref if isinstance(ref, str) else None,
                        topic_id=ref if isinstance(ref, uuid.UUID) else _ZERO,
                        error_code=error,
                        error_message=message,
                    )
                )
            return response
        for r in results:
            response.responses.append(
                DeletableTopicResult(
                    name=r.name,
                    topic_id=r.topic_id or _ZERO,
                    error_code=r.error_code,
                    error_message=r.error_message,
                )
            )
        return response

    return ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")
