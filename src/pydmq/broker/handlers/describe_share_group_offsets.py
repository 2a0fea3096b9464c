"""DescribeShareGroupOffsets (key 90), v0-v1: each share group's share-partition start
offsets (KIP-932), from the share-partition state this node keeps and persists in
``__share_group_state``.

Per group: unknown (no members and no share-partition state) -> GROUP_ID_NOT_FOUND. Topics
null -> every share-partition the group has state for; else the named partitions, those
without state answered with start offset -1. v1's ``lag``: high watermark minus start offset
minus the in-flight records already acknowledged or archived (-1 without state).

Authorization (as Kafka): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), DESCRIBE
on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions). Runs on the event loop.
"""

from __future__ import annotations

import uuid

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._shares import share_groups
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from pydmq.shares.partition import RecordState, SharePartition
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def _partition(
    ctx: BrokerContext,
    group_id: str,
    name: str,
    topic_id: uuid.UUID,
    index: int,
    share_partition: SharePartition | None,
) -> DescribeShareGroupOffsetsResponsePartition:
    if share_partition is None:
        return DescribeShareGroupOffsetsResponsePartition(
            partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1
        )
    led, _ = ctx.broker.replica_manager.leader_partition(TopicPartition(name, index))
    done = sum(1 for _, r in share_partition.in_flight() if r.state in _DONE)
    lag = -1 if led is None else max(0, led.high_watermark - share_partition.start_offset - done)
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=index,
        start_offset=share_partition.start_offset,
        leader_epoch=share_groups(ctx).partitions.leader_epoch_of(group_id, topic_id, index),
        lag=lag,
    )


def handle(
    ctx: BrokerContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    service = share_groups(ctx)
    topics = ctx.broker.topics
    response = DescribeShareGroupOffsetsResponse()
    for group in request.groups:
        answer = DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id)
        response.groups.append(answer)
        if group_denied(ctx, group.group_id, AclOperation.DESCRIBE):
            answer.error_code = GROUP_DENIED
            continue
        if not service.exists(group.group_id):
            answer.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            answer.error_message = f"Group {group.group_id} not found."
            continue
        state = service.partitions.group_offsets(group.group_id)
        wanted: list[tuple[str, list[int]]] = []
        if group.topics is None:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, index in sorted(state):
                by_topic.setdefault(topic_id, []).append(index)
            for topic_id, indexes in by_topic.items():
                info = topics.by_id(topic_id)
                if info is not None:
                    wanted.append((info.name, indexes))
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in group.topics]
        for name, indexes in wanted:
            info = topics.get(name)
            topic_id = info.topic_id if info is not None else uuid.UUID(int=0)
            out = DescribeShareGroupOffsetsResponseTopic(topic_name=name, topic_id=topic_id)
            answer.topics.append(out)
            if info is None or not authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if info is not None:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                out.partitions = [
                    DescribeShareGroupOffsetsResponsePartition(
                        partition_index=i, start_offset=-1, leader_epoch=-1, lag=-1, error_code=code
                    )
                    for i in indexes
                ]
                continue
            out.partitions = [
                _partition(ctx, group.group_id, name, topic_id, i, state.get((topic_id, i)))
                for i in indexes
            ]
    return response


HANDLER = ApiHandlerSpec(90, 0, 1, handle, "DescribeShareGroupOffsets")
