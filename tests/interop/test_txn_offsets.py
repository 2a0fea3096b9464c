"""Transactional offsets seen by real clients' OffsetFetch (kafka-python, confluent-kafka).

A raw TxnOffsetCommit (our codecs over TCP) writes a group's offsets in a producer's
transaction; ``GroupCoordinator.complete_transaction`` is called in process, on the broker's
loop, as the WriteTxnMarkers handler will once the transaction coordinator is merged. Until
the COMMIT marker the clients see no offset (stable fetches answer UNSTABLE_OFFSET_COMMIT,
which they retry); after it they see the transaction's offset; after an ABORT the last
committed one stays. An in-process broker (``EmbeddedBroker``) on a loopback port.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.log import partition_for
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError  # noqa: E402
from confluent_kafka import TopicPartition as CkTopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer  # noqa: E402
from kafka import TopicPartition as KpTopicPartition  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "txn-offsets"
PARTITIONS = 3  # offsets.topic.num.partitions


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"offsets.topic.num.partitions": PARTITIONS, "num.partitions": 1}
    with EmbeddedBroker(tmp_path_factory.mktemp("txn") / "d", overrides=overrides) as b:
        with RawClient(b.bootstrap) as raw:
            request = MetadataRequest(
                topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True
            )
            raw.request(3, 9, request)
            assert raw.request(3, 9, request).body.topics[0].error_code == 0
        yield b


def txn_commit(broker: EmbeddedBroker, group: str, pid: int, offset: int) -> None:
    with RawClient(broker.bootstrap) as raw:
        body = raw.request(
            28,
            3,
            TxnOffsetCommitRequest(
                transactional_id=f"tx-{group}",
                group_id=group,
                producer_id=pid,
                producer_epoch=0,
                topics=[
                    TxnOffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=[
                            TxnOffsetCommitRequestPartition(
                                partition_index=0, committed_offset=offset
                            )
                        ],
                    )
                ],
            ),
        ).body
        assert body.topics[0].partitions[0].error_code == 0


def complete(broker: EmbeddedBroker, group: str, pid: int, commit: bool) -> int:
    coordinator: GroupCoordinator = broker.broker.group_coordinator  # type: ignore[attr-defined]

    async def call() -> int:
        return await coordinator.complete_transaction(
            partition_for(group, PARTITIONS), pid, 0, 0, commit
        )

    loop: asyncio.AbstractEventLoop = broker._loop  # type: ignore[assignment]
    return asyncio.run_coroutine_threadsafe(call(), loop).result(10)


def kafka_python_offset(broker: EmbeddedBroker, group: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.list_group_offsets({group: [KpTopicPartition(TOPIC, 0)]})[group]
    finally:
        admin.close()
    committed = answer.get(KpTopicPartition(TOPIC, 0))
    return -1 if committed is None else committed.offset


def confluent_offset(broker: EmbeddedBroker, group: str, *, stable: bool) -> tuple[int, int]:
    """(partition error code, offset) from confluent-kafka's admin OffsetFetch."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    request = ConsumerGroupTopicPartitions(group, [CkTopicPartition(TOPIC, 0)])
    future = admin.list_consumer_group_offsets([request], require_stable=stable)[group]
    [tp] = future.result(30).topic_partitions
    return (0 if tp.error is None else tp.error.code()), tp.offset


def test_offsets_show_only_after_the_commit_marker(broker: EmbeddedBroker) -> None:
    group = "txn-commit"
    txn_commit(broker, group, pid=7000, offset=42)
    assert kafka_python_offset(broker, group) == -1
    assert confluent_offset(broker, group, stable=False)[1] < 0  # no committed offset
    error, _ = confluent_offset(broker, group, stable=True)
    assert error == E.UNSTABLE_OFFSET_COMMIT
    assert complete(broker, group, 7000, commit=True) == 0
    assert kafka_python_offset(broker, group) == 42
    assert confluent_offset(broker, group, stable=True) == (0, 42)


def test_an_aborted_transaction_leaves_the_committed_offset(broker: EmbeddedBroker) -> None:
    group = "txn-abort"
    txn_commit(broker, group, pid=7001, offset=10)
    assert complete(broker, group, 7001, commit=True) == 0
    txn_commit(broker, group, pid=7001, offset=20)
    assert kafka_python_offset(broker, group) == 10
    assert complete(broker, group, 7001, commit=False) == 0
    assert kafka_python_offset(broker, group) == 10
    assert confluent_offset(broker, group, stable=True) == (0, 10)


def test_read_committed_consumers_wait_for_the_transaction(broker: EmbeddedBroker) -> None:
    """A read_committed consumer's committed() asks for stable offsets and retries
    UNSTABLE_OFFSET_COMMIT: it answers the transaction's offset once the marker is written.
    (confluent-kafka gives up at its timeout; kafka-python's retries are bounded by theirs.)"""
    group = "txn-wait"
    txn_commit(broker, group, pid=7002, offset=5)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        with pytest.raises(ck.KafkaException) as pending:
            consumer.committed([CkTopicPartition(TOPIC, 0)], timeout=2)
        assert pending.value.args[0].code() in (
            KafkaError._TIMED_OUT,
            KafkaError.UNSTABLE_OFFSET_COMMIT,
        )
        answers: list[int] = []
        waiter = threading.Thread(
            target=lambda: answers.append(consumer_offset(broker, group)),
        )
        waiter.start()
        assert complete(broker, group, 7002, commit=True) == 0
        waiter.join(60)
        assert answers == [5]
        [tp] = consumer.committed([CkTopicPartition(TOPIC, 0)], timeout=30)
        assert tp.offset == 5
    finally:
        consumer.close()


def consumer_offset(broker: EmbeddedBroker, group: str) -> int:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    try:
        committed = consumer.committed(KpTopicPartition(TOPIC, 0), timeout_ms=30_000)
    finally:
        consumer.close()
    return -1 if committed is None else int(committed)
