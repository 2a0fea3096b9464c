"""Cluster mode: a group's transactional offsets survive a coordinator failover.

Three nodes, ``__consumer_offsets`` of one partition replicated to all three. A TxnOffsetCommit
to the group's coordinator is pending (UNSTABLE_OFFSET_COMMIT for stable fetches); the marker
sent to a follower is answered NOT_LEADER_OR_FOLLOWER; once the leader stops, the new
coordinator loads the open transaction from its replica and commits it with the marker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydmq.broker.server import Broker
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from pydmq.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pydmq.storage.api import TopicPartition

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(120)

GROUP = "txn-group"
TOPIC = "txn-input"
PID = 77


async def _coordinator(cluster: Cluster, via: int = 1) -> int:
    """The group's coordinator node (asking node ``via``), once its partition is loaded
    there."""
    found: list[int] = []
    conn = cluster.client(via - 1)

    async def located() -> bool:
        body = await conn.request(10, 3, FindCoordinatorRequest(key=GROUP))
        if body.error_code:
            return False
        broker = cluster.broker(body.node_id)
        if broker.group_coordinator.ownership_error(GROUP):
            return False
        found[:] = [body.node_id]
        return True

    await wait_until(located, timeout=30)
    return found[0]


async def _fetch(cluster: Cluster, node_id: int) -> tuple[int, int, int]:
    """(group error, partition error, offset) of a stable OffsetFetch v8 to ``node_id``."""
    body = await cluster.client(node_id - 1).request(
        9,
        8,
        OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=GROUP,
                    topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])],
                )
            ],
            require_stable=True,
        ),
    )
    group = body.groups[0]
    if group.error_code:
        return group.error_code, 0, -1
    [answer] = group.topics[0].partitions
    return 0, answer.error_code, answer.committed_offset


def _complete(broker: Broker, commit: bool) -> asyncio.Future[int]:
    return broker.group_coordinator.complete_transaction(0, PID, 0, 0, commit)


def test_an_open_transaction_survives_a_coordinator_failover(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(
            tmp_path, offsets_topic_num_partitions=1, offsets_topic_replication_factor=3
        )
        try:
            await cluster.start()
            created = await cluster.client(0).request(
                19,
                7,
                CreateTopicsRequest(
                    topics=[CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=3)],
                    timeout=10000,
                ),
            )
            assert created.topics[0].error_code == ErrorCode.NONE
            leader = await _coordinator(cluster)
            await wait_until(lambda: cluster.broker(leader).topics.get(TOPIC) is not None)
            topics = [
                TxnOffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42)
                    ],
                )
            ]
            body = await cluster.client(leader - 1).request(
                28,
                3,
                TxnOffsetCommitRequest(
                    transactional_id="tx",
                    group_id=GROUP,
                    producer_id=PID,
                    producer_epoch=0,
                    topics=topics,
                ),
            )
            assert body.topics[0].partitions[0].error_code == ErrorCode.NONE
            assert await _fetch(cluster, leader) == (0, ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
            follower = next(b for b in cluster.brokers if b.node_id != leader)
            elsewhere = await cluster.client(follower.node_id - 1).request(
                28, 3, TxnOffsetCommitRequest(transactional_id="tx", group_id=GROUP, topics=topics)
            )
            assert elsewhere.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
            assert await _complete(follower, True) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # every replica has the transactional batch before the leader goes
            tp = TopicPartition(OFFSETS_TOPIC, 0)
            hosted = cluster.broker(leader).replica_manager.get(tp)
            assert hosted is not None
            end = hosted.log.log_end_offset
            await wait_until(
                lambda: all(
                    (p := b.replica_manager.get(tp)) is not None and p.log.log_end_offset >= end
                    for b in cluster.brokers
                )
            )
            await cluster.node(leader).stop()
            successor = await _coordinator(cluster, via=follower.node_id)
            assert successor != leader
            assert await _fetch(cluster, successor) == (0, ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
            assert await _complete(cluster.broker(successor), True) == ErrorCode.NONE
            assert await _fetch(cluster, successor) == (0, ErrorCode.NONE, 42)
        finally:
            await cluster.stop()

    asyncio.run(scenario())
