"""OffsetForLeaderEpoch (key 23), v2-v4.

For each partition: the largest epoch <= the requested one and its end offset (the start of the
next epoch, or the log end offset for the current epoch); UNDEFINED (-1, -1) for an epoch older
than the log. ``current_leader_epoch`` is checked: FENCED_LEADER_EPOCH when older than ours,
UNKNOWN_LEADER_EPOCH when newer. Java consumers validate positions with it (KIP-320).
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]


def handle(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    response = OffsetForLeaderEpochResponse()
    for topic in request.topics:
        result = OffsetForLeaderTopicResult(topic=topic.topic)
        response.topics.append(result)
        for p in topic.partitions:
            entry = EpochEndOffset(
                error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=-1, end_offset=-1
            )
            result.partitions.append(entry)
            partition = ctx.broker.replica_manager.get(TopicPartition(topic.topic, p.partition))
            if partition is None:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = p.current_leader_epoch
            if current >= 0 and current != partition.leader_epoch:
                entry.error_code = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if current < partition.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH
                )
                continue
            entry.leader_epoch, entry.end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
    return response


HANDLER = ApiHandlerSpec(23, 2, 4, handle, "OffsetForLeaderEpoch")
