"""DeleteShareGroupOffsets (key 92), v0: forget a share group's state on whole topics
(KIP-932): their share-partitions here and in ``__share_group_state``. Unknown group ->
GROUP_ID_NOT_FOUND; a group with members -> NON_EMPTY_GROUP; an unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION.

Authorization (as Kafka): DELETE on the group (else GROUP_AUTHORIZATION_FAILED), READ on each
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
from pydmq.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)

__all__ = ["HANDLER"]


async def handle(
    ctx: BrokerContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    service = share_groups(ctx)
    offsets = service.offsets
    assert offsets is not None  # the broker persists share state
    group_id = request.group_id
    if group_denied(ctx, group_id, AclOperation.DELETE):
        return DeleteShareGroupOffsetsResponse(error_code=GROUP_DENIED)
    known = group_id in service.groups.groups
    if not known and not await offsets.states(offsets.candidates(group_id)):
        return DeleteShareGroupOffsetsResponse(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found."
        )
    if not service.is_empty(group_id):
        return DeleteShareGroupOffsetsResponse(
            error_code=ErrorCode.NON_EMPTY_GROUP,
            error_message=f"Share group {group_id} is not empty.",
        )
    response = DeleteShareGroupOffsetsResponse()
    for topic in request.topics:
        info = ctx.broker.topics.get(topic.topic_name)
        out = DeleteShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name,
            topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
        )
        response.responses.append(out)
        if not authorized(ctx, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
            out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            codes = await offsets.delete(offsets.candidates(group_id, [info.topic_id]))
            out.error_code = next((c for c in codes.values() if c), ErrorCode.NONE)
    return response


HANDLER = ApiHandlerSpec(92, 0, 0, handle, "DeleteShareGroupOffsets")
