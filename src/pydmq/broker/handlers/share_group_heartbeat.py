"""ShareGroupHeartbeat (key 76), v1: share group membership (KIP-932).

Served by the broker's share groups (:class:`~pydmq.shares.group.ShareGroups`): a member
joins with epoch 0 and its subscribed topic names (its member id is its own, a UUID, as
KIP-1082 requires), heartbeats with its epoch and leaves with -1. Assignment is server-side
(Kafka's ``simple`` assignor behaviour: several members may read one partition); the answer
carries the member's assignment (topic ids and partitions) when it changed, else null, and
``group.share.heartbeat.interval.ms``. A single node coordinates every group (cluster mode:
see docs/SHARE_GROUPS.md).

Authorization (as Kafka): READ on the group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._groups import GROUP_DENIED, group_denied
from pydmq.broker.handlers._shares import share_groups
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.messages.share_group_heartbeat import (
    Assignment,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

__all__ = ["HANDLER"]


def handle(ctx: BrokerContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return ShareGroupHeartbeatResponse(error_code=GROUP_DENIED)
    service = share_groups(ctx)
    result = service.groups.heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        request.rack_id,
        request.subscribed_topic_names,
        ctx.client_id or "",
        f"/{ctx.client_host}",
        service.topics,
        service.clock_ms(),
    )
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
    return ShareGroupHeartbeatResponse(
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=service.settings.heartbeat_interval_ms,
        assignment=assignment,
    )


HANDLER = ApiHandlerSpec(76, 1, 1, handle, "ShareGroupHeartbeat")
