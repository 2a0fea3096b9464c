"""ListOffsets and OffsetForLeaderEpoch over a damaged segment: an error code, never a crash.

A broker holds 300 records (timestamp ``BASE_TS + offset``) in several segments, stops, one
batch header in the middle of the first segment is zeroed (a segment trusted at start-up: the damage is
found when a lookup walks over it), and the broker starts again. A timestamp lookup that must
walk over the damage answers CORRUPT_MESSAGE for the partition and the connection stays open;
lookups that do not touch it, the max-timestamp lookup and OffsetForLeaderEpoch are answered.
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
from pydmq.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pydmq.protocol.records import iter_batch_headers
from pydmq.testing.embedded import EmbeddedBroker

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(60)

TOPIC = "damaged-lookups"
BASE_TS = 1_700_000_000_000
RECORDS = 300
OVERRIDES = {
    "num.partitions": 1,
    "log.segment.bytes": 4096,
    "log.index.interval.bytes": 1 << 20,  # no index entries: lookups walk from segment starts
}


def _by_timestamp(client: KafkaClient, timestamp: int) -> tuple[int, int]:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    answer = client.call(request, ListOffsetsResponse).topics[0].partitions[0]
    return answer.error_code, answer.offset


def _end_for_epoch(client: KafkaClient, epoch: int) -> tuple[int, int]:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderTopic(
                topic=TOPIC,
                partitions=[
                    OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=-1, leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    answer = client.call(request, OffsetForLeaderEpochResponse).topics[0].partitions[0]
    return answer.error_code, answer.end_offset


def test_lookups_over_a_damaged_batch_answer_an_error_code(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with EmbeddedBroker(data, overrides=OVERRIDES) as b:
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 10}
        )
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=0, timestamp=BASE_TS + i)
            if i % 10 == 9:
                producer.flush(10)
        assert producer.flush(10) == 0
        del producer
    files = sorted((data / f"{TOPIC}-0").glob("*.log"))
    assert len(files) >= 2
    victim = files[0]
    headers = list(iter_batch_headers(victim.read_bytes()))
    assert len(headers) >= 3
    bad = headers[2]
    with open(victim, "r+b") as f:
        f.seek(bad.position)
        f.write(b"\x00" * 61)  # the third batch's header

    with EmbeddedBroker(data, overrides=OVERRIDES) as b, KafkaClient(b.bootstrap) as client:
        assert _by_timestamp(client, BASE_TS + 1) == (ErrorCode.NONE, 1)
        assert _by_timestamp(client, BASE_TS + bad.base_offset) == (ErrorCode.CORRUPT_MESSAGE, -1)
        # The connection is still open and later lookups are answered.
        assert _by_timestamp(client, BASE_TS + RECORDS - 1) == (ErrorCode.NONE, RECORDS - 1)
        assert _by_timestamp(client, -3) == (ErrorCode.NONE, RECORDS - 1)  # max timestamp
        assert _by_timestamp(client, -1) == (ErrorCode.NONE, RECORDS)
        assert _end_for_epoch(client, 0) == (ErrorCode.NONE, RECORDS)
