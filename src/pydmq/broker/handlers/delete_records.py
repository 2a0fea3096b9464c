"""DeleteRecords (key 21), v0-v2.

Per partition, in Kafka's order: a partition the cluster does not know is
UNKNOWN_TOPIC_OR_PARTITION; one not led here (a follower, or hosted elsewhere) is
NOT_LEADER_OR_FOLLOWER; a topic whose ``cleanup.policy`` lacks ``delete`` gets
POLICY_VIOLATION; an offset above the high watermark, or negative other than -1 (= the high
watermark), gets OFFSET_OUT_OF_RANGE. Otherwise the leader raises its log start offset to the
offset with ``UnifiedLog.maybe_increment_log_start_offset`` (segments wholly below it are
deleted; an offset below the current log start changes nothing and is no error) and wakes
waiting fetches, so that parked replica fetches bring the new log start to the followers. This
handler keeps the wire mapping and the topic's policy; the leader checks, the deletion and
its wait are the replica manager's
(:meth:`~pydmq.replication.replica_manager.ReplicaManager.delete_records_on_leader`).

``low_watermark`` is the partition's low watermark (``Partition.low_watermark``: the smallest
log start offset over the leader and its followers), -1 on error. While it is below the
requested offset the answer waits, up to the request's ``timeout`` (then REQUEST_TIMED_OUT), for
the followers to report the new log start in their fetches (see
:mod:`pydmq.replication.delayed_delete_records`), so a leader that fails after answering is
not succeeded by a replica that still has the deleted records. On one node, or with a
replication factor of 1, the low watermark is the leader's log start and the answer is
immediate. v1 is v0 (throttling), v2 is flexible. A request of many partitions (up to its
decode budget, 110,000 elements) is handled in slices (:mod:`pydmq.broker.handlers._slices`).

Authorization (as Kafka): DELETE on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._slices import in_slices
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from pydmq.replication.delayed_delete_records import DeleteRecordsResult, PendingDelete
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

# A partition's answer on the wire and the replica manager's result it waits for.
_Waiting = list[tuple[DeleteRecordsPartitionResult, DeleteRecordsResult]]


def handle(
    ctx: BrokerContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse | Awaitable[DeleteRecordsResponse]:
    response = DeleteRecordsResponse()
    pending: list[PendingDelete] = []
    waiting: _Waiting = []

    def finish() -> DeleteRecordsResponse | Awaitable[DeleteRecordsResponse]:
        if pending:
            return _respond_when_replicated(ctx, response, pending, waiting, request.timeout)
        return response

    return in_slices(_delete(ctx, request, response, pending, waiting), finish)


def _delete(
    ctx: BrokerContext,
    request: DeleteRecordsRequest,
    response: DeleteRecordsResponse,
    pending: list[PendingDelete],
    waiting: _Waiting,
) -> Iterator[int]:
    """Fill ``response``, ``pending`` and ``waiting`` one partition at a time; yields 1 per
    topic and per partition."""
    broker = ctx.broker
    replica_manager = broker.replica_manager
    deletable_topics = authorized_names(
        ctx, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in request.topics]
    )
    for topic in request.topics:
        yield 1
        topic_result = DeleteRecordsTopicResult(name=topic.name)
        response.topics.append(topic_result)
        deletable: bool | None = None
        for p in topic.partitions:
            yield 1
            result = DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            topic_result.partitions.append(result)
            if topic.name not in deletable_topics:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            tp = TopicPartition(topic.name, p.partition_index)
            partition, error = replica_manager.leader_partition(tp)
            if partition is None:
                result.error_code = error
                continue
            if deletable is None:
                policy = broker.topic_config(topic.name).get("cleanup.policy")
                deletable = isinstance(policy, list | tuple) and "delete" in policy
            if not deletable:
                result.error_code = ErrorCode.POLICY_VIOLATION
                continue
            deleted, delayed = replica_manager.delete_records_on_leader(partition, p.offset)
            result.error_code = deleted.error_code
            result.low_watermark = deleted.low_watermark
            if delayed is not None:
                pending.append(delayed)
                waiting.append((result, deleted))


async def _respond_when_replicated(
    ctx: BrokerContext,
    response: DeleteRecordsResponse,
    pending: list[PendingDelete],
    waiting: _Waiting,
    timeout_ms: int,
) -> DeleteRecordsResponse:
    await ctx.broker.replica_manager.delayed_delete_records(pending, timeout_ms)
    for result, deleted in waiting:
        result.error_code = deleted.error_code
        result.low_watermark = deleted.low_watermark
    return response


HANDLER = ApiHandlerSpec(21, 0, 2, handle, "DeleteRecords")
