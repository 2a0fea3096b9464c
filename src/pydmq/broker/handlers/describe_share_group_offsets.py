"""DescribeShareGroupOffsets (key 90), v0-v1: each share group's share-partition start
offsets (KIP-932), read from the share coordinators (ReadShareGroupStateSummary, through
:class:`~pydmq.shares.offsets.ShareGroupOffsets`).

Per group: unknown (no members and no share-partition state) -> GROUP_ID_NOT_FOUND. Topics
null -> every share-partition the group has state for; else the named partitions, those
without state answered with start offset -1. v1's ``lag``: high watermark minus start offset
minus the in-flight records already acknowledged or archived (-1 without state, or when the
partition's leader cannot be asked for its high watermark).

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
from pydmq.shares.offsets import PartitionOffsets

__all__ = ["HANDLER"]


def _partition(
    index: int, found: PartitionOffsets | None
) -> DescribeShareGroupOffsetsResponsePartition:
    if found is None:
        return DescribeShareGroupOffsetsResponsePartition(
            partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1
        )
    return DescribeShareGroupOffsetsResponsePartition(
        partition_index=index,
        start_offset=found.start_offset,
        leader_epoch=found.leader_epoch,
        lag=found.lag,
    )


async def handle(
    ctx: BrokerContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    service = share_groups(ctx)
    offsets = service.offsets
    assert offsets is not None  # the broker persists share state
    topics = ctx.broker.topics
    response = DescribeShareGroupOffsetsResponse()
    for group in request.groups:
        group_id = group.group_id
        answer = DescribeShareGroupOffsetsResponseGroup(group_id=group_id)
        response.groups.append(answer)
        if group_denied(ctx, group_id, AclOperation.DESCRIBE):
            answer.error_code = GROUP_DENIED
            continue
        known = group_id in service.groups.groups
        if group.topics is None:
            found = await offsets.describe(group_id, offsets.candidates(group_id))
            known = known or bool(found)
        else:
            named = [topics.get(t.topic_name) for t in group.topics]
            wanted_keys = [
                (group_id, info.topic_id, i)
                for info, t in zip(named, group.topics, strict=True)
                if info is not None
                for i in t.partitions
            ]
            found = await offsets.describe(group_id, wanted_keys)
            if not known and not found:
                known = bool(await offsets.states(offsets.candidates(group_id)))
        if not known:
            answer.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            answer.error_message = f"Group {group_id} not found."
            continue
        wanted: list[tuple[str, list[int]]] = []
        if group.topics is None:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for _, topic_id, index in sorted(found):
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
            out.partitions = [_partition(i, found.get((group_id, topic_id, i))) for i in indexes]
    return response


HANDLER = ApiHandlerSpec(90, 0, 1, handle, "DescribeShareGroupOffsets")
