"""ConsumerGroupHeartbeat (key 68), v0-v1: the consumer group protocol of KIP-848.

Served by the consumer groups of the group's shard
(:class:`~pydmq.groups.consumer.manager.ConsumerGroupManager`, through the group coordinator,
which keeps classic and consumer group ids apart). Joins (member epoch 0),
heartbeats, and leaves (-1; -2 = a static member's temporary leave); answers the member epoch,
``group.consumer.heartbeat.interval.ms``, and the member's full assignment (topic ids and
partitions) when it changed, else null. Version notes: v0 lets the coordinator generate the
member id on join (an empty member id); v1 (KIP-1082) requires the client's own member id on
every request, and adds ``subscribed_topic_regex`` (RE2/J syntax; evaluated with Python ``re``,
full match). Cluster mode: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the group is
not coordinated here / still loading; a heartbeat that wrote records (epoch, member,
assignment changes) is answered once they are committed (and, converting an empty classic
group, once its tombstone is).

Authorization (as Kafka): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.groups.consumer.api import HeartbeatRequest, HeartbeatResult
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.consumer_group_heartbeat import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: ConsumerGroupHeartbeatRequest) -> object:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return ConsumerGroupHeartbeatResponse(error_code=GROUP_DENIED)
    group_coordinator = coordinator(ctx)
    mark = group_coordinator.write_mark
    owned = (
        None
        if request.topic_partitions is None
        else {tp.topic_id: tp.partitions for tp in request.topic_partitions}
    )
    result = group_coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout,
            subscribed_topic_names=request.subscribed_topic_names,
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            topic_partitions=owned,
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client_host}",
            api_version=ctx.api_version,
        )
    )
    if result.done() and not group_coordinator.wrote_since(request.group_id, mark):
        return _response(result.result())
    return _when_committed(group_coordinator, request.group_id, mark, result)


async def _when_committed(
    group_coordinator: GroupCoordinator,
    group_id: str,
    mark: int,
    answer: asyncio.Future[HeartbeatResult],
) -> ConsumerGroupHeartbeatResponse:
    result = await answer
    error = await group_coordinator.await_writes(group_id, mark)
    if error and not result.error_code:
        result = HeartbeatResult(error)
    return _response(result)


def _response(result: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    assignment = (
        None
        if result.assignment is None
        else Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        )
    )
    return ConsumerGroupHeartbeatResponse(
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )


HANDLER = ApiHandlerSpec(68, 0, 1, handle, "ConsumerGroupHeartbeat")
