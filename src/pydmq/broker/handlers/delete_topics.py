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
A client with a ``controller_mutation_rate`` quota is held to it (the partitions deleted)
before the request is forwarded (:mod:`pydmq.broker.handlers._mutation_quota`; strict from
v5).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.handlers._mutation_quota import THROTTLED, finish, mutation_quota
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from pydmq.quotas.controller_mutation import ControllerMutationQuota

__all__ = ["HANDLER"]

_ZERO_UUID = uuid.UUID(int=0)


def _wanted(ctx: BrokerContext, request: DeleteTopicsRequest) -> list[tuple[str | None, uuid.UUID]]:
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, _ZERO_UUID) for name in request.topic_names]


def handle(ctx: BrokerContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    refused: dict[int, int] = dict.fromkeys(
        _denied(ctx, request), ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    quota = mutation_quota(ctx, 5)
    if quota is not None:
        # The authorized topics' partitions, in request order (as Kafka: authorized first).
        topics = ctx.broker.topics
        for index, (name, topic_id) in enumerate(_wanted(ctx, request)):
            if index in refused:
                continue
            info = topics.get(name) if name is not None else topics.by_id(topic_id)
            if not quota.record(0 if info is None else len(info.partitions)):
                refused[index] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    if not refused and quota is None:
        return _forward(ctx, request)
    return _forward_allowed(ctx, request, refused, quota)


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
    ctx: BrokerContext,
    request: DeleteTopicsRequest,
    refused: dict[int, int],
    quota: ControllerMutationQuota | None,
) -> DeleteTopicsResponse:
    """Answer the refused topics here (not authorized, over the mutation quota), forward the
    rest; the answers keep the request's order."""
    wanted = _wanted(ctx, request)
    response = DeleteTopicsResponse()
    if len(refused) < len(wanted):
        if ctx.api_version >= 6:
            forwarded = DeleteTopicsRequest(
                topics=[t for i, t in enumerate(request.topics) if i not in refused],
                timeout=request.timeout,
            )
        else:
            forwarded = DeleteTopicsRequest(
                topic_names=[n for i, n in enumerate(request.topic_names) if i not in refused],
                timeout=request.timeout,
            )
        response = await _forward(ctx, forwarded)
    answers = iter(response.responses)
    response.responses = [
        DeletableTopicResult(
            name=name,
            topic_id=topic_id,
            error_code=refused[i],
            error_message=THROTTLED if refused[i] == ErrorCode.THROTTLING_QUOTA_EXCEEDED else None,
        )
        if i in refused
        else next(answers)
        for i, (name, topic_id) in enumerate(wanted)
    ]
    finish(ctx, quota, response)
    return response


def _forward(ctx: BrokerContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    def unavailable(code: int, message: str) -> DeleteTopicsResponse:
        return DeleteTopicsResponse(
            responses=[
                DeletableTopicResult(
                    name=name, topic_id=topic_id, error_code=code, error_message=message
                )
                for name, topic_id in _wanted(ctx, request)
            ]
        )

    return forward_to_controller(ctx, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(20, 1, 6, handle, "DeleteTopics")
