"""ListOffsets on a leader whose high watermark is below the start of its leader epoch.

A new leader has every committed record, but its high watermark catches up only after its
followers fetch. Until then Kafka answers clients OFFSET_NOT_AVAILABLE (retriable) rather than
an end offset lower than one the old leader may already have shown (Spark's Kafka source reads
an end offset that goes back as data loss). Replica requests are still answered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pydmq.client import KafkaClient
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from pydmq.storage.api import TopicPartition
from pydmq.testing.embedded import EmbeddedBroker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "epoch-start"


def _latest(client: KafkaClient, replica_id: int) -> tuple[int, int]:
    request = ListOffsetsRequest(
        replica_id=replica_id,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
                ],
            )
        ],
    )
    answer = client.call(request, ListOffsetsResponse).topics[0].partitions[0]
    return answer.error_code, answer.offset


def test_clients_get_offset_not_available_until_the_high_watermark_reaches_the_epoch_start(
    tmp_path: Path,
) -> None:
    with EmbeddedBroker(tmp_path / "d", overrides={"num.partitions": 1}) as b:
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(3):
            producer.produce(TOPIC, value=b"v%d" % i, partition=0)
        assert producer.flush(10) == 0
        partition = b.broker.replica_manager.get(TopicPartition(TOPIC, 0))  # type: ignore[attr-defined]
        with KafkaClient(b.bootstrap) as client:
            assert _latest(client, -1) == (ErrorCode.NONE, 3)
            # As a leader elected with records its high watermark has not passed yet.
            saved = partition.leader_epoch_start_offset
            partition.leader_epoch_start_offset = 5
            try:
                assert _latest(client, -1) == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
                assert _latest(client, 2) == (ErrorCode.NONE, 3)  # a replica is answered
            finally:
                partition.leader_epoch_start_offset = saved
            assert _latest(client, -1) == (ErrorCode.NONE, 3)
