"""AlterPartition (key 56), v2-v3: a partition leader proposes a new ISR.

A compare-and-set on (leader epoch, partition epoch), decided by
:func:`~pydmq.controller.operations.alter_partition`; the answer carries the committed
partition state (the leader applies it at once, before LeaderAndIsr arrives). v3 sends the ISR
as ``new_isr_with_epochs`` (broker id + broker epoch); v2 as ``new_isr``. Topics are named by
id. Non-active controllers answer NOT_CONTROLLER at the top level.

Authorization: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(:mod:`pydmq.controller.handlers._authorize`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller.handlers._authorize import cluster_action_denied
from pydmq.controller.handlers._common import run_operation
from pydmq.controller.operations import AlterPartitionItem, AlterPartitionReply, alter_partition
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    PartitionDataResponse,
    TopicDataResponse,
)

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: AlterPartitionRequest
    ) -> AlterPartitionResponse:
        if cluster_action_denied(runtime.authorizer, ctx):
            return AlterPartitionResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        items = [
            AlterPartitionItem(
                topic_id=topic.topic_id,
                partition_id=p.partition_index,
                leader_epoch=p.leader_epoch,
                new_isr=(
                    [b.broker_id for b in p.new_isr_with_epochs]
                    if ctx.api_version >= 3
                    else list(p.new_isr)
                ),
                partition_epoch=p.partition_epoch,
                leader_recovery_state=p.leader_recovery_state,
            )
            for topic in request.topics
            for p in topic.partitions
        ]
        reply, error, _ = await run_operation(
            runtime,
            lambda image: alter_partition(
                image,
                runtime.operation_context,
                broker_id=request.broker_id,
                broker_epoch=request.broker_epoch,
                partitions=items,
            ),
        )
        if reply is None:
            return AlterPartitionResponse(error_code=error)
        assert isinstance(reply, AlterPartitionReply)
        by_topic: dict[uuid.UUID, TopicDataResponse] = {}
        for result in reply.partitions:
            topic = by_topic.get(result.topic_id)
            if topic is None:
                topic = by_topic[result.topic_id] = TopicDataResponse(topic_id=result.topic_id)
            topic.partitions.append(
                PartitionDataResponse(
                    partition_index=result.partition_id,
                    error_code=result.error_code,
                    leader_id=result.leader,
                    leader_epoch=result.leader_epoch,
                    isr=list(result.isr),
                    leader_recovery_state=result.leader_recovery_state,
                    partition_epoch=result.partition_epoch,
                )
            )
        return AlterPartitionResponse(error_code=reply.error_code, topics=list(by_topic.values()))

    return ApiHandlerSpec(56, 2, 3, handle, "AlterPartition")
