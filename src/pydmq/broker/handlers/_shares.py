"""What the share group handlers (keys 76-79) share: the broker's share group service, the
acknowledgement of one partition, the wait for acknowledged state to be persisted, and the
leader fields of their answers."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Mapping, Sequence
from typing import Protocol, TypeVar

from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.shares.service import ShareGroupService
from pydmq.storage.api import TopicPartition

__all__ = ["acknowledge", "leader_epoch", "once_persisted", "share_groups"]

R = TypeVar("R")


def share_groups(ctx: BrokerContext) -> ShareGroupService:
    service: ShareGroupService = ctx.broker.share_groups
    return service


class AckBatch(Protocol):
    first_offset: int
    last_offset: int
    acknowledge_types: list[int]


def acknowledge(
    ctx: BrokerContext,
    group_id: str,
    member_id: str,
    topic_id: uuid.UUID,
    partition: int,
    batches: Sequence[AckBatch],
) -> int:
    """Apply one partition's acknowledgement batches; the partition's acknowledge error."""
    info = ctx.broker.topics.by_id(topic_id)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if not authorized(ctx, AclOperation.READ, ResourceType.TOPIC, info.name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return share_groups(ctx).partitions.acknowledge(
        group_id,
        member_id,
        topic_id,
        partition,
        [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches],
    )


def leader_epoch(ctx: BrokerContext, topic_id: uuid.UUID, partition: int) -> int:
    """This node's leader epoch of a partition (-1 when it does not lead it)."""
    info = ctx.broker.topics.by_id(topic_id)
    if info is None:
        return -1
    led, _ = ctx.broker.replica_manager.leader_partition(TopicPartition(info.name, partition))
    return -1 if led is None else led.leader_epoch


def once_persisted(
    ctx: BrokerContext,
    group_id: str,
    answers: Mapping[tuple[uuid.UUID, int], object],
    field: str,
    response: R,
) -> R | Awaitable[R]:
    """``response`` once the state the request changed on ``answers``' partitions is
    persisted (at once when nothing is pending); a partition whose write failed answers the
    write's error in ``field`` (unless it has an error already)."""
    partitions = share_groups(ctx).partitions
    pending = partitions.persisted((group_id, t, p) for t, p in answers)
    if not pending:
        return response

    async def wait() -> R:
        for (_, topic_id, index), future in pending.items():
            code = await future
            answer = answers[(topic_id, index)]
            if code and not getattr(answer, field):
                setattr(answer, field, code)
        return response

    return wait()
