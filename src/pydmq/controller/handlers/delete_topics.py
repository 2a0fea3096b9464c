"""DeleteTopics (key 20), v1-v6, forwarded by brokers to the active controller.

Topics by name (v1-v5 ``topic_names``, v6 ``topics[].name``) or by id (v6). One
RemoveTopicRecord per topic; the channel manager then tells every replica to stop and delete
it (StopReplica) and every broker to forget it (UpdateMetadata).

A request may name up to 110,000 topics (its decode budget): the names are deleted by one
operation per :data:`DELETE_SLICE`, and the event loop serves others between them (a single
node's DeleteTopics of 110,000 names used to hold it ~1 s); like Kafka's, a DeleteTopics is
not atomic across its topics.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import ControllerResult, DeleteTopicResult, delete_topics
from pydmq.metadata.image import MetadataImage
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

__all__ = ["make_handler"]

_ZERO = uuid.UUID(int=0)
DELETE_SLICE = 5_000


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
        response = DeleteTopicsResponse(responses=list(invalid))
        for start in range(0, len(refs), DELETE_SLICE):
            if start:
                await asyncio.sleep(0)  # other connections are served between slices
            chunk = refs[start : start + DELETE_SLICE]
            results, error, message = await run_operation(controller, _deleting(controller, chunk))
            if results is None:
                response.responses.extend(
                    DeletableTopicResult(
                        name=ref if isinstance(ref, str) else None,
                        topic_id=ref if isinstance(ref, uuid.UUID) else _ZERO,
                        error_code=error,
                        error_message=message,
                    )
                    for ref in refs[start:]
                )
                return response
            response.responses.extend(
                DeletableTopicResult(
                    name=r.name,
                    topic_id=r.topic_id or _ZERO,
                    error_code=r.error_code,
                    error_message=r.error_message,
                )
                for r in results
            )
        return response

    return ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")


def _deleting(
    controller: AdminController, refs: list[str | uuid.UUID]
) -> Callable[[MetadataImage], ControllerResult[list[DeleteTopicResult]]]:
    return lambda image: delete_topics(image, controller.operation_context, refs)
