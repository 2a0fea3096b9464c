"""Leader checks shared by the partition APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch).

Kafka's order (``Partition.localLogWithEpochOrThrow``): an unknown partition first, then the
client's ``current_leader_epoch`` (older than ours: FENCED_LEADER_EPOCH; newer: the client
heard of an epoch we have not, UNKNOWN_LEADER_EPOCH), then leadership
(NOT_LEADER_OR_FOLLOWER). A partition this broker does not host but the cluster knows is
NOT_LEADER_OR_FOLLOWER too, so clients refresh metadata instead of giving up. In single-node
mode every hosted partition is led here, so only the first two checks can fail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.replication.partition import Partition

__all__ = ["leader_partition"]


def leader_partition(
    broker: Broker, tp: TopicPartition, current_leader_epoch: int = -1, require_leader: bool = True
) -> tuple[Partition | None, int]:
    """The partition if this broker may serve ``tp`` as leader, else None and an error code."""
    partition = broker.replica_manager.get(tp)
    if partition is None:
        cluster = broker.cluster
        if cluster is not None and cluster.metadata_cache.partition(tp) is not None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
        return None, (
            ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch < partition.leader_epoch
            else ErrorCode.UNKNOWN_LEADER_EPOCH
        )
    if require_leader and not partition.is_leader:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    return partition, ErrorCode.NONE
