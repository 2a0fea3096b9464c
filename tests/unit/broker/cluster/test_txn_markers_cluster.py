"""Transaction markers in cluster mode: WriteTxnMarkers reaches the leader over the
inter-broker listener only, the marker is acknowledged once the ISR has it, and followers
learn the aborted transaction and the open ones (their last stable offset). The transactions
are those of no transaction coordinator, so partition verification (KIP-890) is off."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydmq.broker.server import Broker
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from pydmq.storage.api import AbortedTxn, TopicPartition
from pydmq.testing.conformance_transactions import transactional_batch

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(90)

TOPIC = "txn-cluster"
TP = TopicPartition(TOPIC, 0)


def produce(pid: int, seq: int) -> ProduceRequest:
    batch = transactional_batch(pid, 0, seq)
    return ProduceRequest(
        transactional_id="t",
        acks=-1,
        timeout=10_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )


def abort(pid: int) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=False,
                topics=[WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                coordinator_epoch=4,
            )
        ]
    )


def marker_error(response: object) -> int:
    return int(response.markers[0].topics[0].partitions[0].error_code)  # type: ignore[attr-defined]


def leader_of(cluster: Cluster) -> Broker | None:
    for broker in cluster.brokers:
        partition = broker.replica_manager.get(TP)
        if partition is not None and partition.is_leader:
            return broker
    return None


def test_markers_over_the_inter_broker_listener_reach_the_followers(tmp_path: Path) -> None:
    async def scenario() -> None:
        # the produces are those of no coordinator: the partitions are not verified
        cluster = Cluster(
            tmp_path, replication_listener=True, transaction_partition_verification_enable=False
        )
        try:
            await cluster.start()
            created = await cluster.client(0).request(
                19,
                7,
                CreateTopicsRequest(
                    topics=[CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=3)],
                    timeout=10_000,
                ),
            )
            assert created.topics[0].error_code == ErrorCode.NONE
            await wait_until(lambda: leader_of(cluster) is not None)
            leader = leader_of(cluster)
            assert leader is not None
            index = leader.node_id - 1
            partition = leader.replica_manager.get(TP)
            assert partition is not None
            await wait_until(lambda: len(partition.isr) == 3)
            produced = await cluster.client(index).request(0, 9, produce(42, 0))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE

            forged = await cluster.client(index).request(27, 1, abort(42))
            assert marker_error(forged) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            follower = next(b for b in cluster.brokers if b is not leader)
            misdirected = await cluster.connect(follower.node_id - 1, "REPLICATION").request(
                27, 1, abort(42)
            )
            assert marker_error(misdirected) == ErrorCode.NOT_LEADER_OR_FOLLOWER
            written = await cluster.connect(index, "REPLICATION").request(27, 1, abort(42))
            assert marker_error(written) == ErrorCode.NONE
            assert partition.high_watermark == 2  # acknowledged once the ISR had it

            opened = await cluster.client(index).request(0, 9, produce(43, 0))
            assert opened.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            followers = [b for b in cluster.brokers if b is not leader]

            def caught_up() -> bool:
                for broker in followers:
                    replica = broker.replica_manager.get(TP)
                    if replica is None or replica.log.high_watermark < 3:
                        return False
                return True

            await wait_until(caught_up)
            for broker in followers:
                replica = broker.replica_manager.get(TP)
                assert replica is not None
                assert replica.log.collect_aborted_txns(0, 100) == [AbortedTxn(42, 0, 1, 2)]
                assert replica.log.last_stable_offset == 2  # producer 43's open transaction
                entry = replica.log.producer_state.last_entry(42)
                assert entry is not None and entry.coordinator_epoch == 4
        finally:
            await cluster.stop()

    asyncio.run(scenario())
