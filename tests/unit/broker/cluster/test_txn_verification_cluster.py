"""Cluster mode: partition verification (KIP-890 part 1) when the transaction coordinator is
another broker. The leader of a transaction's partition asks the coordinator (the leader of
the id's ``__transaction_state`` partition) with AddPartitionsToTxn v4 ``verify_only`` over
the inter-broker listener: a partition in the transaction is appended, one never added is
refused, and so is a zombie batch after the abort, whose partition's last stable offset stays
at its log end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydmq.net.client import NodeConnection
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.end_txn import EndTxnRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.storage.api import TopicPartition
from pydmq.testing.conformance_transactions import transactional_batch

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(120)

TOPIC = "verified"
TXN = "remote-txn"


async def _coordinator(cluster: Cluster) -> int:
    found: list[int] = []

    async def located() -> bool:
        body = await cluster.client(0).request(
            10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN])
        )
        [coordinator] = body.coordinators
        if coordinator.error_code:
            return False
        found[:] = [coordinator.node_id]
        return True

    await wait_until(located, timeout=30)
    return found[0]


def _leader_of(cluster: Cluster, partition: int) -> int | None:
    tp = TopicPartition(TOPIC, partition)
    for broker in cluster.brokers:
        replica = broker.replica_manager.get(tp)
        if replica is not None and replica.is_leader:
            return broker.node_id
    return None


async def _produce(conn: NodeConnection, partition: int, pid: int, epoch: int, seq: int) -> int:
    request = ProduceRequest(
        transactional_id=TXN,
        acks=-1,
        timeout=10_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC,
                partition_data=[
                    PartitionProduceData(
                        index=partition, records=transactional_batch(pid, epoch, seq)
                    )
                ],
            )
        ],
    )
    body = await conn.request(0, 9, request)
    return int(body.responses[0].partition_responses[0].error_code)


def test_a_remote_coordinator_verifies_the_first_batch(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(
            tmp_path,
            replication_listener=True,
            transaction_state_log_num_partitions=1,
            transaction_state_log_replication_factor=1,
            transaction_state_log_min_isr=1,
            transaction_partition_verification_enable=True,
        )
        try:
            await cluster.start()
            created = await cluster.client(0).request(
                19,
                7,
                CreateTopicsRequest(
                    topics=[CreatableTopic(name=TOPIC, num_partitions=3, replication_factor=1)],
                    timeout=10000,
                ),
            )
            assert created.topics[0].error_code == ErrorCode.NONE
            await wait_until(lambda: all(_leader_of(cluster, p) is not None for p in range(3)))
            # InitProducerId creates __transaction_state; its leader is the coordinator
            init = None

            async def initialized() -> bool:
                nonlocal init
                coordinator = await _coordinator(cluster)
                init = await cluster.client(coordinator - 1).request(
                    22, 4, InitProducerIdRequest(transactional_id=TXN, transaction_timeout=60000)
                )
                return init.error_code == ErrorCode.NONE

            await wait_until(initialized, timeout=30)
            assert init is not None
            pid, epoch = init.producer_id, init.producer_epoch
            coordinator = await _coordinator(cluster)
            to_coordinator = cluster.client(coordinator - 1)
            # the partitions led elsewhere than the coordinator
            remote = [p for p in range(3) if _leader_of(cluster, p) != coordinator]
            assert len(remote) >= 2, "striped placement leads 3 partitions on 3 brokers"
            added, other = remote[0], remote[1]
            body = await to_coordinator.request(
                24,
                3,
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=TXN,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[added])],
                ),
            )
            assert (
                body.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
                == 0
            )

            def client_of(partition: int) -> NodeConnection:
                leader = _leader_of(cluster, partition)
                assert leader is not None
                return cluster.client(leader - 1)

            assert await _produce(client_of(added), added, pid, epoch, 0) == ErrorCode.NONE
            assert await _produce(client_of(other), other, pid, epoch, 0) == (
                ErrorCode.INVALID_TXN_STATE
            )
            ended = await to_coordinator.request(
                26,
                3,
                EndTxnRequest(
                    transactional_id=TXN, producer_id=pid, producer_epoch=epoch, committed=False
                ),
            )
            assert ended.error_code == ErrorCode.NONE

            async def aborted() -> bool:
                body = await to_coordinator.request(
                    65, 0, DescribeTransactionsRequest(transactional_ids=[TXN])
                )
                return bool(body.transaction_states[0].transaction_state == "CompleteAbort")

            await wait_until(aborted, timeout=30)
            # the zombie: same producer id and epoch, its transaction aborted
            assert await _produce(client_of(added), added, pid, epoch, 1) == (
                ErrorCode.INVALID_TXN_STATE
            )
            leader = cluster.broker(_leader_of(cluster, added) or -1)
            replica = leader.replica_manager.get(TopicPartition(TOPIC, added))
            assert replica is not None
            assert replica.log.log_end_offset == 2  # the aborted batch and its marker
            assert replica.log.last_stable_offset == 2
            other_replica = cluster.broker(_leader_of(cluster, other) or -1).replica_manager.get(
                TopicPartition(TOPIC, other)
            )
            assert other_replica is not None and other_replica.log.log_end_offset == 0
        finally:
            await cluster.stop()

    asyncio.run(scenario())
