"""OffsetDelete (key 47), v0.

Deletes committed offsets of a group (tombstones). Top-level GROUP_ID_NOT_FOUND for an unknown
group, INVALID_GROUP_ID for an empty id; per partition UNKNOWN_TOPIC_OR_PARTITION for an
unknown topic and GROUP_SUBSCRIBED_TO_TOPIC while a member of a non-empty ``consumer`` group
subscribes to the topic.
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.handlers._groups import coordinator
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

__all__ = ["HANDLER"]


def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    topics = ctx.broker.topics
    errors: dict[tuple[str, int], int] = {}
    known: list[tuple[str, int]] = []
    for topic in request.topics:
        info = topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if info is None or not 0 <= p.partition_index < len(info.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    top, results = coordinator(ctx).delete_offsets(request.group_id, known)
    if top:
        return OffsetDeleteResponse(error_code=top)
    errors.update(results)
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


HANDLER = ApiHandlerSpec(47, 0, 0, handle, "OffsetDelete")
