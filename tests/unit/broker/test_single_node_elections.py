"""A single node's ElectLeaders and partition reassignments, answered by its own controller in
process: its one replica already leads every partition, so there is nothing to elect or move."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.broker.handlers import (
    alter_partition_reassignments,
    elect_leaders,
    list_partition_reassignments,
)
from pydmq.broker.server import Broker
from pydmq.config import BrokerConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from pydmq.protocol.messages.elect_leaders import ElectLeadersRequest, TopicPartitions
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.admin_requests import context
from support.nodes import broker_of

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    node = broker_of(
        BrokerConfig({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"})
    )
    node.topic_creator.create_topic("t", 2)
    yield node
    node.replica_manager.shutdown()


def call(broker: Broker, api_key: int, version: int, handle: Any, request: Any) -> Any:
    async def run() -> Any:
        return await handle(context(broker, api_key, version), request)

    return asyncio.run(run())


def test_elect_leaders_has_nothing_to_elect(broker: Broker) -> None:
    request = ElectLeadersRequest(
        election_type=0, topic_partitions=[TopicPartitions(topic="t", partitions=[0, 1, 7])]
    )
    response = call(broker, 43, 2, elect_leaders.handle, request)
    assert response.error_code == ErrorCode.NONE
    [topic] = response.replica_election_results
    answers = sorted(
        (p.partition_id, p.error_code, p.error_message) for p in topic.partition_result
    )
    assert answers == [
        (0, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        (1, ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
        (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
    ]
    everything = call(
        broker, 43, 2, elect_leaders.handle, ElectLeadersRequest(topic_partitions=None)
    )
    assert (everything.error_code, everything.replica_election_results) == (ErrorCode.NONE, [])
    unknown_type = call(
        broker,
        43,
        2,
        elect_leaders.handle,
        ElectLeadersRequest(
            election_type=5, topic_partitions=[TopicPartitions(topic="t", partitions=[0])]
        ),
    )
    assert unknown_type.error_code == ErrorCode.INVALID_REQUEST
    [[refused]] = [t.partition_result for t in unknown_type.replica_election_results]
    assert refused.error_code == ErrorCode.INVALID_REQUEST


def test_reassignments_can_only_keep_this_node(broker: Broker) -> None:
    node = broker.node_id

    def partition(index: int, replicas: list[int] | None) -> ReassignablePartition:
        return ReassignablePartition(partition_index=index, replicas=replicas)

    request = AlterPartitionReassignmentsRequest(
        topics=[
            ReassignableTopic(
                name="t", partitions=[partition(0, [node]), partition(1, [node + 1])]
            ),
            ReassignableTopic(name="t2", partitions=[partition(0, [node])]),
            ReassignableTopic(name="t", partitions=[]),
        ]
    )
    response = call(broker, 45, 0, alter_partition_reassignments.handle, request)
    answered = {
        (t.name, p.partition_index): p.error_code for t in response.responses for p in t.partitions
    }
    assert answered == {
        ("t", 0): ErrorCode.NONE,
        ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ("t2", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    cancel = AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic(name="t", partitions=[partition(0, None)])]
    )
    [[cancelled]] = [
        t.partitions
        for t in call(broker, 45, 0, alter_partition_reassignments.handle, cancel).responses
    ]
    assert cancelled.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    listed = call(
        broker,
        46,
        0,
        list_partition_reassignments.handle,
        ListPartitionReassignmentsRequest(topics=None),
    )
    assert (listed.error_code, listed.topics) == (ErrorCode.NONE, [])
    assert [p.replicas for p in broker.topics.get("t").partitions] == [[node], [node]]  # type: ignore[union-attr]
