"""Clients may read internal topics but never write or create them (issue 15, finding 6).

On af52f34 a plain client's Produce to ``__consumer_offsets`` was appended (the coordinator
replays that topic at start-up, so a forged record became a group's committed offset), and
CreateTopics created ``__consumer_offsets`` and ``__cluster_metadata`` with any settings.
Kafka 4.4 answers the Produce INVALID_TOPIC_EXCEPTION and refuses ``__cluster_metadata`` with
INVALID_REQUEST "Creation of internal topic __cluster_metadata is prohibited."; pydmq refuses
every reserved name that way (Kafka lets a client create ``__consumer_offsets`` first, after
which its FindCoordinator answers COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.messages.produce import ProduceRequest
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.broker_checks import produce_request
from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

RESERVED = [
    "__consumer_offsets",
    "__transaction_state",
    "__cluster_metadata",
    "__share_group_state",
]
TIMEOUT = 15


def _produce(topic: str) -> ProduceRequest:
    return produce_request(topic, build_batch([SimpleRecord(b"forged-key", b"forged-value")]))


def _create(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names],
        timeout=10000,
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("internal") / "d") as b:
        yield b


def _commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[KafkaTopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def test_produce_to_consumer_offsets_is_refused(broker: EmbeddedBroker) -> None:
    topic = f"user-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    group = f"g-{uuid.uuid4().hex[:8]}"
    _commit_offset(broker.bootstrap, group, topic, 7)  # the coordinator's own writes work

    with RawClient(broker.bootstrap) as client:
        (answer,) = client.request(0, 9, _produce("__consumer_offsets")).body.responses
    (partition,) = answer.partition_responses
    assert partition.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert partition.base_offset == -1

    # A real client sees the same: the delivery report carries the error, nothing is stored.
    reports: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000})
    producer.produce(
        "__consumer_offsets",
        b"v",
        key=b"k",
        partition=0,
        on_delivery=lambda err, _msg: reports.append(err),
    )
    producer.flush(TIMEOUT)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == KafkaError.TOPIC_EXCEPTION

    # The group's committed offset is the coordinator's, and commits still work.
    _commit_offset(broker.bootstrap, group, topic, 9)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        (committed,) = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert committed.offset == 9


def test_create_reserved_topics_is_refused(broker: EmbeddedBroker) -> None:
    allowed = f"ok-{uuid.uuid4().hex[:8]}"
    with RawClient(broker.bootstrap) as client:
        results = client.request(19, 7, _create(*RESERVED, allowed)).body.topics
    assert [r.name for r in results] == [*RESERVED, allowed]
    for result in results[:-1]:
        assert result.error_code == ErrorCode.INVALID_REQUEST, result
        assert result.error_message == f"Creation of internal topic {result.name} is prohibited."
    assert results[-1].error_code == ErrorCode.NONE
    with RawClient(broker.bootstrap) as client:
        listed = {t.name for t in client.request(3, 12, MetadataRequest(topics=None)).body.topics}
    assert allowed in listed
    assert not listed & {"__cluster_metadata", "__share_group_state", "__transaction_state"}
