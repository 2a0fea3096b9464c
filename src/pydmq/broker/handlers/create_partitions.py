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
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> Awaitable[CreatePartitionsResponse]:
    def unavailable(code: int, message: str) -> CreatePartitionsResponse:
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
                for t in request.topics
            ]
        )

    alterable = authorized_names(ctx, AclOperation.ALTER, ResourceType.TOPIC, _names(request))
    if len(alterable) < len({t.name for t in request.topics}):
        return _forward_alterable(ctx, request, alterable)
    return forward_to_controller(ctx, request, unavailable, request.timeout)


def _names(request: CreatePartitionsRequest) -> list[str]:
    return [topic.name for topic in request.topics]


async def _forward_alterable(
    ctx: BrokerContext, request: CreatePartitionsRequest, alterable: set[str]
) -> CreatePartitionsResponse:
    """Refuse the topics the principal may not alter, forward the rest; the answers keep
    the request's order."""
    allowed = [t for t in request.topics if t.name in alterable]
    answers: list[CreatePartitionsTopicResult] = []
    if allowed:
        forwarded = CreatePartitionsRequest(
            topics=allowed, timeout=request.timeout, validate_only=request.validate_only
        )
        answers = list((await handle(ctx, forwarded)).results)
    replies = iter(answers)
    return CreatePartitionsResponse(
        results=[
            next(replies)
            if t.name in alterable
            else CreatePartitionsTopicResult(
                name=t.name,
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="The topic authorization is failed.",
            )
            for t in request.topics
        ]
    )


HANDLER = ApiHandlerSpec(37, 0, 3, handle, "CreatePartitions")
