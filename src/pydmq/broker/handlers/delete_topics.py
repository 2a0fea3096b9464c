"""DeleteTopics (key 20), v1-v6.

By name (all versions) or by topic id (v6+; UNKNOWN_TOPIC_ID). Unknown names get
UNKNOWN_TOPIC_OR_PARTITION; ``delete.topic.enable=false`` gives TOPIC_DELETION_DISABLED.
Deleting removes the partitions' logs and their fetch-session entries. Many names (up to the
decode budget, 110,000) are deleted in slices (:mod:`pydmq.broker.handlers._slices`).

In cluster mode the request is forwarded to the active controller at the same version and its
response returned (REQUEST_TIMED_OUT per item when no controller answers).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterator

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.handlers._slices import in_slices
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


def _delete_local(
    ctx: BrokerContext, request: DeleteTopicsRequest, response: DeleteTopicsResponse
) -> Iterator[int]:
    """Fill ``response`` one topic at a time; yields 1 per topic."""
    broker = ctx.broker
    wanted: list[tuple[str | None, object]] = []
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    for name, topic_id in wanted:
        yield 1
        result = DeletableTopicResult(name=name, error_code=ErrorCode.NONE)
        response.responses.append(result)
        if name is None:
            info = broker.topics.by_id(topic_id) if topic_id is not None else None  # type: ignore[arg-type]
            if info is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                result.topic_id = topic_id  # type: ignore[assignment]
                continue
            name = info.name
            result.name = name
        try:
            deleted = broker.topic_ops.delete_topic(name)
        except TopicError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
            continue
        result.topic_id = deleted.topic_id


def handle(
    ctx: BrokerContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse | Awaitable[DeleteTopicsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        response = DeleteTopicsResponse()
        return in_slices(_delete_local(ctx, request, response), lambda: response)

    def unavailable(code: int, message: str) -> DeleteTopicsResponse:
        if ctx.api_version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, _ZERO_UUID) for name in request.topic_names]
        return DeleteTopicsResponse(
            responses=[
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=code, error_message=message
                )
                for name, topic_id in wanted
            ]
        )

    return forward_to_controller(ctx, cluster, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")
