"""DeleteTopics (key 20), v1-v6.

By name (all versions) or by topic id (v6+; UNKNOWN_TOPIC_ID). Unknown names get
UNKNOWN_TOPIC_OR_PARTITION; ``delete.topic.enable=false`` gives TOPIC_DELETION_DISABLED.
Deleting removes the partitions' logs and their fetch-session entries. One operation of the
controller, one metadata log entry, for the whole request (up to the decode budget, 110,000
names).

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT per item when none answers; a single node's own, in process).

Authorization (as Kafka): DELETE on each topic (a topic named by id: DESCRIBE, then DELETE),
else that topic is TOPIC_AUTHORIZATION_FAILED and the others are forwarded.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


def handle(ctx: BrokerContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    denied = _denied(ctx, request)
    if denied:
        return _forward_allowed(ctx, request, denied)
    return _forward(ctx, request)


def _denied(ctx: BrokerContext, request: DeleteTopicsRequest) -> set[int]:
    """The positions of the request's topics the principal may not delete."""
    if ctx.broker.authorizer is None:
        return set()
    denied: set[int] = set()
    topics = ctx.broker.topics
    if ctx.api_version < 6:
        for i, old_name in enumerate(request.topic_names):
            if not authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, old_name):
                denied.add(i)
        return denied
    for i, topic in enumerate(request.topics):
        name = topic.name
        if name is None:
            info = topics.by_id(topic.topic_id)
            if info is None:
                continue  # the controller answers UNKNOWN_TOPIC_ID
            name = info.name
            if not authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                denied.add(i)
                continue
        if not authorized(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            denied.add(i)
    return denied


async def _forward_allowed(
    ctx: BrokerContext, request: DeleteTopicsRequest, denied: set[int]
) -> DeleteTopicsResponse:
    """Forward the topics not denied; the answers keep the request's order."""
    v6 = ctx.api_version >= 6
    count = len(request.topics) if v6 else len(request.topic_names)
    allowed = [i for i in range(count) if i not in denied]
    answers: list[DeletableTopicResult] = []
    if allowed:
        forwarded = DeleteTopicsRequest(timeout=request.timeout)
        if v6:
            forwarded.topics = [request.topics[i] for i in allowed]
        else:
            forwarded.topic_names = [request.topic_names[i] for i in allowed]
        answers = list((await _forward(ctx, forwarded)).responses)
    results = iter(answers)
    response = DeleteTopicsResponse()
    for i in range(count):
        if i in denied:
            topic: DeleteTopicState | None = request.topics[i] if v6 else None
            response.responses.append(
                DeletableTopicResult(
                    name=topic.name if topic is not None else request.topic_names[i],
                    topic_id=topic.topic_id if topic is not None else _ZERO_UUID,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                )
            )
        else:
            response.responses.append(next(results))
    return response


def _forward(ctx: BrokerContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
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

    return forward_to_controller(ctx, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")
