"""DeleteRecords (key 21), v0-v2.

Per partition, raises the log start offset to ``offset`` (-1 = the high watermark) with
``UnifiedLog.maybe_increment_log_start_offset``; segments wholly below it are deleted. Checks
in Kafka's order: a partition the cluster does not know is UNKNOWN_TOPIC_OR_PARTITION; one not
led here (a follower, or hosted elsewhere) is NOT_LEADER_OR_FOLLOWER, so only the leader ever
moves a log start on request; a topic whose ``cleanup.policy`` lacks ``delete`` gets
POLICY_VIOLATION; an offset above the high watermark, or negative other than -1, gets
OFFSET_OUT_OF_RANGE. ``low_watermark`` is the log start offset afterwards
(-1 on error); an offset below the current log start is no error and changes nothing. Waiting
fetches of the partition are woken. On one node every replica's log start moves at once, so
the request never waits for ``timeout``. v1 is v0 (throttling), v2 is flexible.
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.handlers._leadership import leader_partition
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from pydmq.storage.api import OffsetOutOfRangeError, TopicPartition

__all__ = ["HANDLER"]

HIGH_WATERMARK = -1


def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    broker = ctx.broker
    replica_manager = broker.replica_manager
    response = DeleteRecordsResponse()
    for topic in request.topics:
        topic_result = DeleteRecordsTopicResult(name=topic.name)
        response.topics.append(topic_result)
        deletable: bool | None = None
        for p in topic.partitions:
            result = DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            topic_result.partitions.append(result)
            tp = TopicPartition(topic.name, p.partition_index)
            partition, error = leader_partition(broker, tp)
            if partition is None:
                result.error_code = error
                continue
            if deletable is None:
                policy = broker.topic_config(topic.name).get("cleanup.policy")
                deletable = isinstance(policy, list | tuple) and "delete" in policy
            if not deletable:
                result.error_code = ErrorCode.POLICY_VIOLATION
                continue
            log = partition.log
            offset = log.high_watermark if p.offset == HIGH_WATERMARK else p.offset
            if offset < 0 or offset > log.high_watermark:
                result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                changed = log.maybe_increment_log_start_offset(offset)
            except OffsetOutOfRangeError:
                result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            result.low_watermark = log.log_start_offset
            if changed:
                replica_manager.fetch_purgatory.notify(tp)
    return response


HANDLER = ApiHandlerSpec(21, 0, 2, handle, "DeleteRecords")
