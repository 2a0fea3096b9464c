"""CreatePartitions (key 37), v0-v3.

Grows topics through ``TopicOperations.create_partitions``, with Kafka's checks: unknown topic
-> UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one -> INVALID_PARTITIONS;
manual ``assignments`` (one replica list per new partition, same size, known brokers) else
INVALID_REPLICA_ASSIGNMENT. ``validate_only`` checks without creating. A topic named twice in
one request gets INVALID_REQUEST for each occurrence. Admission and atomicity as CreateTopics:
POLICY_VIOLATION beyond 10,000 new partitions per request or ``pydmq.max.broker.partitions``;
a storage error -> KAFKA_STORAGE_ERROR for every topic, nothing grown. v1 is v0 with throttling semantics, v2
is flexible, v3 is v2 (KIP-890 version bump); the body is the same in all versions.

In cluster mode the request is forwarded to the active controller at the same version and its
response returned (REQUEST_TIMED_OUT per item when no controller answers).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.topic_ops import NewPartitions
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

__all__ = ["HANDLER"]


async def _handle_local(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    broker = ctx.broker
    response = CreatePartitionsResponse()
    counts = collections.Counter(t.name for t in request.topics)
    wanted: list[tuple[CreatePartitionsTopicResult, NewPartitions]] = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name, error_code=ErrorCode.NONE)
        response.results.append(result)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = "Duplicate topic in request."
            continue
        assignments = (
            None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        )
        wanted.append((result, NewPartitions(topic.name, topic.count, assignments)))
    errors = await broker.topic_ops.create_partitions(
        [new for _, new in wanted], request.validate_only
    )
    for (result, _), error in zip(wanted, errors, strict=True):
        if error is not None:
            result.error_code = error.error_code
            result.error_message = error.message
    return response


def handle(
    ctx: BrokerContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse | Awaitable[CreatePartitionsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return _handle_local(ctx, request)

    def unavailable(code: int, message: str) -> CreatePartitionsResponse:
        return CreatePartitionsResponse(
            results=[
                CreatePartitionsTopicResult(name=t.name, error_code=code, error_message=message)
                for t in request.topics
            ]
        )

    return forward_to_controller(ctx, cluster, request, unavailable, request.timeout)


HANDLER = ApiHandlerSpec(37, 0, 3, handle, "CreatePartitions")
