"""CreatePartitions (key 37), v0-v3.

Grows topics through the controller's ``create_partitions``, with Kafka's checks: unknown topic
-> UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one -> INVALID_PARTITIONS;
manual ``assignments`` (one replica list per new partition, same size, known brokers) else
INVALID_REPLICA_ASSIGNMENT. ``validate_only`` checks without creating. A topic named twice in
one request gets INVALID_REQUEST ("Duplicate topic.") for each occurrence. Admission and atomicity as CreateTopics:
POLICY_VIOLATION beyond 10,000 new partitions per request or ``pydmq.max.broker.partitions``;
a storage error -> KAFKA_STORAGE_ERROR for every topic, nothing grown. v1 is v0 with throttling semantics, v2
is flexible, v3 is v2 (KIP-890 version bump); the body is the same in all versions.

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT per item when none answers; a single node's own, in process).

Authorization (as Kafka): ALTER on each topic, else that topic is TOPIC_AUTHORIZATION_FAILED
and the others are forwarded.
A client with a ``controller_mutation_rate`` quota is held to it (the partitions added) before
the request is forwarded (:mod:`pydmq.broker.handlers._mutation_quota`; strict from v3).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.handlers._mutation_quota import THROTTLED, finish, mutation_quota
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from pydmq.quotas.controller_mutation import ControllerMutationQuota

__all__ = ["HANDLER"]

_NOT_AUTHORIZED = "The topic authorization is failed."


def handle(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> Awaitable[CreatePartitionsResponse]:
    names = [topic.name for topic in request.topics]
    alterable = authorized_names(ctx, AclOperation.ALTER, ResourceType.TOPIC, names)
    refused: dict[str, int] = {
        name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for name in names if name not in alterable
    }
    quota = mutation_quota(ctx, 3)
    if quota is not None:
        # The authorized topics' new partitions, in request order (authorized first).
        for t in request.topics:
            if t.name in refused:
                continue
            info = ctx.broker.topics.get(t.name)
            added = max(0, t.count - len(info.partitions)) if info is not None else 0
            if not quota.record(added):
                refused[t.name] = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    if not refused and quota is None:
        return _forward(ctx, request)
    return _forward_allowed(ctx, request, refused, quota)


def _forward(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> Awaitable[CreatePartitionsResponse]:
    def unavailable(code: int, message: str) -> CreatePartitionsResponse:
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
                for t in request.topics
            ]
        )

    return forward_to_controller(ctx, request, unavailable, request.timeout)


async def _forward_allowed(
    ctx: BrokerContext,
    request: CreatePartitionsRequest,
    refused: dict[str, int],
    quota: ControllerMutationQuota | None,
) -> CreatePartitionsResponse:
    """Answer the refused topics here (not authorized, over the mutation quota), forward the
    rest; the answers keep the request's order."""
    allowed = [t for t in request.topics if t.name not in refused]
    response = CreatePartitionsResponse()
    if allowed:
        forwarded = CreatePartitionsRequest(
            topics=allowed, timeout=request.timeout, validate_only=request.validate_only
        )
        response = await _forward(ctx, forwarded)
    answers = iter(response.results)
    response.results = [
        CreatePartitionsTopicResult(
            name=t.name,
            error_code=refused[t.name],
            error_message=_NOT_AUTHORIZED
            if refused[t.name] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else THROTTLED,
        )
        if t.name in refused
        else next(answers)
        for t in request.topics
    ]
    finish(ctx, quota, response)
    return response


HANDLER = ApiHandlerSpec(37, 0, 3, handle, "CreatePartitions")
