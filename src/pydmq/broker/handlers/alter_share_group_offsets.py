"""AlterShareGroupOffsets (key 91), v0: set a share group's start offset on partitions
(KIP-932). The group is created (empty) when unknown, as Kafka does; a group with members ->
NON_EMPTY_GROUP. Each partition's share-partition starts at the given offset with nothing in
flight: InitializeShareGroupState at its share coordinator, at the next state epoch (which
fences the partition leader's older state). Unknown topic or partition ->
UNKNOWN_TOPIC_OR_PARTITION; the share coordinator's error when it cannot be reached.

Authorization (as Kafka): READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
topic (else TOPIC_AUTHORIZATION_FAILED). Runs on the event loop.
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
from pydmq.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)

__all__ = ["HANDLER"]


async def handle(
    ctx: BrokerContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    service = share_groups(ctx)
    offsets = service.offsets
    assert offsets is not None  # the broker persists share state
    group_id = request.group_id
    if group_denied(ctx, group_id, AclOperation.READ):
        return AlterShareGroupOffsetsResponse(error_code=GROUP_DENIED)
    if not service.is_empty(group_id):
        return AlterShareGroupOffsetsResponse(
            error_code=ErrorCode.NON_EMPTY_GROUP,
            error_message=f"Share group {group_id} is not empty.",
        )
    service.ensure_group(group_id)
    response = AlterShareGroupOffsetsResponse()
    for topic in request.topics:
        info = ctx.broker.topics.get(topic.topic_name)
        out = AlterShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name,
            topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
        )
        response.responses.append(out)
        allowed = authorized(ctx, AclOperation.READ, ResourceType.TOPIC, topic.topic_name)
        for wanted in topic.partitions:
            code: int = ErrorCode.NONE
            if not allowed:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= wanted.partition_index < len(info.partitions):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                key = (group_id, info.topic_id, wanted.partition_index)
                code = await offsets.alter(key, wanted.start_offset)
            out.partitions.append(
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=wanted.partition_index, error_code=code
                )
            )
    return response


HANDLER = ApiHandlerSpec(91, 0, 0, handle, "AlterShareGroupOffsets")
