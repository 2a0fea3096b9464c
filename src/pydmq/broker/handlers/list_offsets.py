"""ListOffsets (key 2), v1-v10.

Timestamps: -1 latest (the high watermark = log end on one node; the last stable offset for
read_committed, isolation_level=1 from v2, which also bounds the timestamp lookups, as
Kafka's lastFetchableOffset), -2 earliest (log start offset), -3 max timestamp (v7+, KIP-734: the record
carrying the largest timestamp), -4 earliest local (= earliest without tiered storage), -5
latest tiered (v9+, KIP-1005: no tiered storage, so offset -1), otherwise the first record
with timestamp >= target across batches and segments (offset -1 when none). A
``current_leader_epoch`` (v4+) is checked against the partition's epoch. Only the leader
answers (NOT_LEADER_OR_FOLLOWER). A special timestamp below the version that introduced it
(-3 before v7, -4 before v8, -5 before v9) or an unknown negative one is UNSUPPORTED_VERSION
for that partition, as in Kafka. A leader whose high watermark is still below the start of
its leader epoch answers clients OFFSET_NOT_AVAILABLE (retriable), as Kafka does. A timestamp
lookup that meets damaged stored data answers CORRUPT_MESSAGE for the partition.

A partition named more than once in a request gets INVALID_REQUEST at every occurrence, as
in Kafka (a timestamp lookup decodes records: repeating one would multiply that work). A
request of many partitions (up to its decode budget, 110,000 elements) is answered in slices
(:mod:`pydmq.broker.handlers._slices`).

Authorization (as Kafka): DESCRIBE on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Iterator

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._slices import in_slices
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from pydmq.protocol.records import CorruptRecordError
from pydmq.replication.corruption import corrupt_read_error
from pydmq.storage.api import StorageCorruptionError, TopicPartition
from pydmq.storage.log import UnifiedLog

__all__ = ["HANDLER"]

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The first request version allowed to ask for each special timestamp; any other negative
# timestamp, or one asked for below its version, is UNSUPPORTED_VERSION, as Kafka answers.
SPECIAL_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def handle(
    ctx: BrokerContext, request: ListOffsetsRequest
) -> ListOffsetsResponse | Awaitable[ListOffsetsResponse]:
    response = ListOffsetsResponse()
    return in_slices(_answer(ctx, request, response), lambda: response)


def _names(request: ListOffsetsRequest) -> list[str]:
    return [topic.name for topic in request.topics]


def _answer(
    ctx: BrokerContext, request: ListOffsetsRequest, response: ListOffsetsResponse
) -> Iterator[int]:
    """Fill ``response`` one partition at a time; yields 1 per topic and per partition."""
    replica_manager = ctx.broker.replica_manager
    read_committed = ctx.api_version >= 2 and request.isolation_level == 1
    named = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, _names(request))
    yield len(named)  # the counting above
    for topic in request.topics:
        yield 1
        topic_response = ListOffsetsTopicResponse(name=topic.name)
        response.topics.append(topic_response)
        for p in topic.partitions:
            yield 1
            result = ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=ErrorCode.NONE,
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            topic_response.partitions.append(result)
            if topic.name not in described:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if named[(topic.name, p.partition_index)] > 1:
                result.error_code = ErrorCode.INVALID_REQUEST
                continue
            if p.timestamp < 0 and ctx.api_version < SPECIAL_SINCE.get(p.timestamp, 1 << 15):
                result.error_code = ErrorCode.UNSUPPORTED_VERSION
                continue
            epoch = p.current_leader_epoch if ctx.api_version >= 4 else -1
            partition, error = replica_manager.leader_partition(
                TopicPartition(topic.name, p.partition_index), epoch
            )
            if partition is None:
                result.error_code = error
                continue
            log = partition.log
            # Kafka's lastFetchableOffset: what a consumer of this isolation level may read.
            upper = log.last_stable_offset if read_committed else log.high_watermark
            if request.replica_id < 0 and partition.leader_epoch_start_offset > log.high_watermark:
                # A new leader whose high watermark has not reached the start of its epoch
                # would answer offsets below what clients may already have seen from the old
                # leader (Spark reads that as data loss): Kafka answers OFFSET_NOT_AVAILABLE
                # (retriable) to clients until the high watermark catches up.
                result.error_code = ErrorCode.OFFSET_NOT_AVAILABLE
                continue
            try:
                yield from _lookup(result, log, p.timestamp, upper)
            except (StorageCorruptionError, CorruptRecordError) as exc:
                result.error_code = corrupt_read_error(partition.tp, exc)
                result.timestamp = result.offset = result.leader_epoch = -1


def _lookup(
    result: ListOffsetsPartitionResponse, log: UnifiedLog, timestamp: int, upper: int
) -> Iterator[int]:
    """Fill ``result``; a lookup by timestamp walks a batch's records in steps (yielded as
    elements: a stored batch of millions of tiny records must not hold the loop)."""
    match timestamp:
        case -1:
            result.offset = upper
            result.leader_epoch = log.latest_epoch
        case -2 | -4:
            result.offset = log.log_start_offset
            result.leader_epoch = _epoch_at(log.leader_epochs, log.log_start_offset)
        case -3:
            found = yield from log.max_timestamp_steps()
            if found is not None and found.offset < upper:
                result.timestamp, result.offset = found.timestamp, found.offset
                result.leader_epoch = found.leader_epoch
        case -5:
            pass
        case target:
            found = yield from log.offset_by_timestamp_steps(target)
            if found is not None and found.offset < upper:
                result.timestamp, result.offset = found.timestamp, found.offset
                result.leader_epoch = found.leader_epoch


def _epoch_at(epochs: list[tuple[int, int]], offset: int) -> int:
    found = -1
    for epoch, start in epochs:
        if start <= offset:
            found = epoch
    if found == -1 and epochs:
        found = epochs[0][0]
    return found


HANDLER = ApiHandlerSpec(2, 1, 10, handle, "ListOffsets")
