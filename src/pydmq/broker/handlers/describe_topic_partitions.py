"""DescribeTopicPartitions (key 75), v0 (KIP-966).

The paginated successor of Metadata for describing topics (Java's Admin.describeTopics uses it
when advertised). Topics are answered in name order: the requested ones, or every topic when
the list is empty. At most min(``response_partition_limit``, 2000) partitions are returned;
when more remain, ``next_cursor`` names the topic and partition to continue from (a topic
that ended exactly at the limit continues at the next topic, partition 0). A ``cursor`` starts
at that topic (which must be among the requested ones, else INVALID_REQUEST for the request,
as Kafka) and partition. Per topic: UNKNOWN_TOPIC_OR_PARTITION when unknown,
INVALID_TOPIC_EXCEPTION for an illegal name, else the topic id, is_internal and, per
partition, the fields Metadata gives (leader, leader epoch, replicas, ISR, offline replicas)
plus empty eligible_leader_replicas / last_known_elr (no ELR on pydmq). Topic authorized
operations: every operation a TOPIC supports (no authorizer, as Kafka without one).

Authorization (as Kafka): all topics list only those the principal may DESCRIBE; a named
topic it may not is TOPIC_AUTHORIZATION_FAILED.

The pages of all topics are encoded once per metadata version (by cursor and partition limit)
and reused from ``BrokerServices.metadata_answers`` when the answer is the same for every
client (no authorizer, no request quota), as Metadata's "all topics" (issue 21).
"""

from __future__ import annotations

import uuid

from pydmq.api.handler import ApiHandlerSpec, RawResponse
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import IN_PROCESS, authorized_names, authorized_operations
from pydmq.broker.metadata_answers import AnswerKey
from pydmq.protocol.acl import TOPIC_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
    encode_response,
)
from pydmq.protocol.primitives import Writer
from pydmq.protocol.topic_names import topic_name_problem

__all__ = ["HANDLER"]

DESCRIBE_TOPIC_PARTITIONS = 75
MAX_PARTITION_LIMIT = 2000
_ZERO_UUID = uuid.UUID(int=0)

# AclOperation codes the TOPIC resource supports: READ 3, WRITE 4, CREATE 5, DELETE 6,
# ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.


def _error_topic(name: str, code: int) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=code,
        name=name,
        topic_id=_ZERO_UUID,
        is_internal=False,
        partitions=[],
        topic_authorized_operations=-(2**31),
    )


def handle(
    ctx: BrokerContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse | RawResponse:
    """Every topic's page from ``metadata_answers`` when the answer is the same for every
    client (all topics, no authorizer, no request quota), else built."""
    broker = ctx.broker
    if request.topics or not (
        (broker.authorizer is None or ctx.listener == IN_PROCESS)
        and not broker.quotas.request.enabled
    ):
        return _answer(ctx, request)
    cursor = request.cursor
    page = (
        None if cursor is None else cursor.topic_name,
        0 if cursor is None else cursor.partition_index,
        request.response_partition_limit,
    )
    key = AnswerKey(DESCRIBE_TOPIC_PARTITIONS, ctx.listener, ctx.api_version, True, page)
    image_version = broker.metadata.image_version()
    cached = broker.metadata_answers.get(image_version, key)
    if cached is not None:
        return cached
    writer = Writer()
    encode_response(writer, _answer(ctx, request), ctx.api_version)
    body = writer.getvalue()
    encoded = RawResponse((body,), len(body))
    broker.metadata_answers.put(image_version, key, encoded)
    return encoded


def _answer(
    ctx: BrokerContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    broker = ctx.broker
    response = DescribeTopicPartitionsResponse(next_cursor=None)
    if request.topics:
        names = sorted({t.name for t in request.topics})
    else:
        names = sorted(t.name for t in broker.topics)
    described = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if not request.topics:
        names = [n for n in names if n in described]
    cursor = request.cursor
    first_partition = 0
    if cursor is not None:
        if cursor.partition_index < 0:
            # Kafka fails the whole request; the client gets INVALID_REQUEST on every topic.
            response.topics = [_error_topic(n, ErrorCode.INVALID_REQUEST) for n in names]
            return response
        if request.topics and cursor.topic_name not in names:
            response.topics = [_error_topic(n, ErrorCode.INVALID_REQUEST) for n in names]
            return response
        names = [n for n in names if n >= cursor.topic_name]
        if names and names[0] == cursor.topic_name:
            first_partition = cursor.partition_index
    remaining = min(max(request.response_partition_limit, 0), MAX_PARTITION_LIMIT)
    for position, name in enumerate(names):
        start = first_partition if position == 0 else 0
        if remaining <= 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=start)
            break
        if name not in described:
            response.topics.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        topic = broker.topics.get(name)
        if topic is None:
            code = (
                ErrorCode.INVALID_TOPIC_EXCEPTION
                if topic_name_problem(name)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            response.topics.append(_error_topic(name, code))
            continue
        selected = topic.partitions[start : start + remaining]
        remaining -= len(selected)
        response.topics.append(
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                topic_authorized_operations=authorized_operations(
                    ctx, ResourceType.TOPIC, topic.name, TOPIC_OPERATIONS
                ),
                partitions=[
                    DescribeTopicPartitionsResponsePartition(
                        error_code=ErrorCode.NONE,
                        partition_index=p.index,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replicas),
                        isr_nodes=list(p.isr),
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=[],
                    )
                    for p in selected
                ],
            )
        )
        if start + len(selected) < len(topic.partitions):
            response.next_cursor = Cursor(
                topic_name=topic.name, partition_index=start + len(selected)
            )
            break
    return response


HANDLER = ApiHandlerSpec(DESCRIBE_TOPIC_PARTITIONS, 0, 0, handle, "DescribeTopicPartitions")
