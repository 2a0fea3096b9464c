"""OffsetForLeaderEpoch (key 23), v2-v4.

For each partition: the largest epoch <= the requested one and its end offset (the start of the
next epoch, or the log end offset for the current epoch); UNDEFINED (-1, -1) for an epoch older
than the log. ``current_leader_epoch`` is checked: FENCED_LEADER_EPOCH when older than ours,
UNKNOWN_LEADER_EPOCH when newer. Java consumers validate positions with it (KIP-320); followers
(``replica_id`` >= 0) truncate with it before fetching from a new leader. Only the leader
answers (NOT_LEADER_OR_FOLLOWER): the replica manager's leader checks
(:meth:`~pydmq.replication.replica_manager.ReplicaManager.leader_partition`).

Authorization (as Kafka): CLUSTER_ACTION on the cluster (followers), or DESCRIBE on each
topic, else its partitions are TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster, authorized_names
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    replica_manager = ctx.broker.replica_manager
    response = OffsetForLeaderEpochResponse()
    described = _described(ctx, request)
    for topic in request.topics:
        result = OffsetForLeaderTopicResult(topic=topic.topic)
        response.topics.append(result)
        for p in topic.partitions:
            entry = EpochEndOffset(
                error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=-1, end_offset=-1
            )
            result.partitions.append(entry)
            if described is not None and topic.topic not in described:
                entry.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = replica_manager.leader_partition(
                TopicPartition(topic.topic, p.partition), p.current_leader_epoch
            )
            if partition is None:
                entry.error_code = error
                continue
            entry.leader_epoch, entry.end_offset = partition.last_offset_for_epoch(p.leader_epoch)
    return response


def _described(ctx: BrokerContext, request: OffsetForLeaderEpochRequest) -> set[str] | None:
    """The topics the principal may ask about (None: all, a follower's CLUSTER_ACTION)."""
    if authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return None
    names = [t.topic for t in request.topics]
    return authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)


HANDLER = ApiHandlerSpec(23, 2, 4, handle, "OffsetForLeaderEpoch")
