"""OffsetDelete (key 47), v0.

Deletes committed offsets of a group (tombstones). Top-level GROUP_ID_NOT_FOUND for an unknown
group, INVALID_GROUP_ID for an empty id; per partition UNKNOWN_TOPIC_OR_PARTITION for an
unknown topic and GROUP_SUBSCRIBED_TO_TOPIC while a member of a non-empty ``consumer`` group
subscribes to the topic. NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the group is not
coordinated here / still loading. Cluster mode: answered once the tombstones are committed.

Authorization (as Kafka): DELETE on the group, else GROUP_AUTHORIZATION_FAILED; READ on
each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: OffsetDeleteRequest) -> object:
    if group_denied(ctx, request.group_id, AclOperation.DELETE):
        return OffsetDeleteResponse(error_code=GROUP_DENIED)
    topics = ctx.broker.topics
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, _names(request))
    errors: dict[tuple[str, int], int] = {}
    known: list[tuple[str, int]] = []
    for topic in request.topics:
        info = topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append(tp)
    group_coordinator = coordinator(ctx)
    mark = group_coordinator.write_mark
    top, results = group_coordinator.delete_offsets(request.group_id, known)
    if top:
        return OffsetDeleteResponse(error_code=top)
    errors.update(results)
    if group_coordinator.wrote_since(request.group_id, mark):
        committed = group_coordinator.await_writes(request.group_id, mark)
        return _when_committed(committed, request, errors)
    return _response(request, errors)


def _names(request: OffsetDeleteRequest) -> list[str]:
    return [topic.name for topic in request.topics]


async def _when_committed(
    committed: Awaitable[int],
    request: OffsetDeleteRequest,
    errors: dict[tuple[str, int], int],
) -> OffsetDeleteResponse:
    error = await committed
    if error:
        return OffsetDeleteResponse(error_code=error)
    return _response(request, errors)


def _response(
    request: OffsetDeleteRequest, errors: dict[tuple[str, int], int]
) -> OffsetDeleteResponse:
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
