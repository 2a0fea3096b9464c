"""DescribeProducers (key 61), v0 (KIP-664): the active producers of partitions led here.

Per partition, from the leader's producer state: producer id, epoch, last sequence (-1 for a
producer that only wrote markers), last timestamp, the coordinator epoch of its last marker
(-1 before one) and the first offset of its open transaction (-1 when none). A partition not
hosted here is NOT_LEADER_OR_FOLLOWER when the cluster knows it, else
UNKNOWN_TOPIC_OR_PARTITION; one hosted but not led here is NOT_LEADER_OR_FOLLOWER (Kafka
answers it from the leader only). A partition named twice is answered twice.

Authorization (as Kafka): READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]


def _names(request: DescribeProducersRequest) -> list[str]:
    return [topic.name for topic in request.topics]


def handle(ctx: BrokerContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    replica_manager = ctx.broker.replica_manager
    response = DescribeProducersResponse()
    readable = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, _names(request))
    for topic in request.topics:
        topic_response = TopicResponse(name=topic.name)
        response.topics.append(topic_response)
        for index in topic.partition_indexes:
            result = PartitionResponse(partition_index=index, error_code=ErrorCode.NONE)
            topic_response.partitions.append(result)
            if topic.name not in readable:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            partition, error = replica_manager.leader_partition(TopicPartition(topic.name, index))
            if partition is None:
                result.error_code = error
                continue
            state = partition.log.producer_state
            result.active_producers = [
                ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=(
                        -1
                        if entry.current_txn_first_offset is None
                        else entry.current_txn_first_offset
                    ),
                )
                for entry in state.producers.values()
            ]
    return response


HANDLER = ApiHandlerSpec(61, 0, 0, handle, "DescribeProducers")
