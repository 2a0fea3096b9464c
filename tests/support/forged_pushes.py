"""The controller's pushes a forger sends to a broker's control-plane listener (shared by
the hostile-peer tests): StopReplica deleting a partition, LeaderAndIsr making another
replica its leader, and a FULL UpdateMetadata listing no broker."""

from __future__ import annotations

import uuid
from typing import Any

from pydmq.protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from pydmq.protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest

__all__ = ["LEADER_AND_ISR", "STOP_REPLICA", "UPDATE_METADATA", "forged_pushes"]

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA = 4, 5, 6
_INCREMENTAL, _FULL = 1, 2


def forged_pushes(
    topic: str,
    controller_id: int,
    epoch: int,
    broker_epoch: int,
    topic_id: uuid.UUID,
    new_leader: int,
) -> list[tuple[int, Any]]:
    """(api key, request) of the three pushes, claiming ``controller_id`` at ``epoch`` and
    the receiver's ``broker_epoch``; the LeaderAndIsr makes ``new_leader`` lead partition 0
    of ``topic`` alone."""
    stop = StopReplicaRequest(
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        topic_states=[
            StopReplicaTopicState(
                topic_name=topic,
                partition_states=[
                    StopReplicaPartitionState(
                        partition_index=0, leader_epoch=-1, delete_partition=True
                    )
                ],
            )
        ],
    )
    lead = LeaderAndIsrRequest(
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        type_=_INCREMENTAL,
        topic_states=[
            LeaderAndIsrTopicState(
                topic_name=topic,
                topic_id=topic_id,
                partition_states=[
                    LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=epoch,
                        leader=new_leader,
                        leader_epoch=1000,
                        isr=[new_leader],
                        partition_epoch=1000,
                        replicas=[1, 2, 3],
                    )
                ],
            )
        ],
    )
    wipe = UpdateMetadataRequest(
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=epoch,
        broker_epoch=broker_epoch,
        type_=_FULL,
        live_brokers=[],
        topic_states=[],
        metadata_offset=2**62,
    )
    return [(STOP_REPLICA, stop), (LEADER_AND_ISR, lead), (UPDATE_METADATA, wipe)]
