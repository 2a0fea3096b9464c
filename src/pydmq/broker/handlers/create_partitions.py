"""CreatePartitions (key 37), v0-v3.

Grows topics through ``TopicOperations.create_partitions``, with Kafka's checks: unknown topic
-> UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one -> INVALID_PARTITIONS;
manual ``assignments`` (one replica list per new partition, same size, known brokers) else
INVALID_REPLICA_ASSIGNMENT. ``validate_only`` checks without creating. A topic named twice in
one request gets INVALID_REQUEST for each occurrence. v1 is v0 with throttling semantics, v2
is flexible, v3 is v2 (KIP-890 version bump); the body is the same in all versions.
"""

from __future__ import annotations

import collections

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.topic_ops import TopicError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

__all__ = ["HANDLER"]


def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    response = CreatePartitionsResponse()
    counts = collections.Counter(t.name for t in request.topics)
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
        try:
            broker.topic_ops.create_partitions(
                topic.name, topic.count, assignments, request.validate_only
            )
        except TopicError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
    return response


HANDLER = ApiHandlerSpec(37, 0, 3, handle, "CreatePartitions")
