"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): on 3209cc2 neither was served (the
connection was closed, as for any key without a handler). Answers as Kafka 4.4's (observed
against the reference broker; tests/interop/test_differential.py ``log_dirs`` compares them):
one log dir per node, per-partition sizes, total/usable bytes from v4, LOG_DIR_NOT_FOUND for
a move to any other dir. kafka-python's admin client drives both."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.errors import LogDirNotFoundError, NoError
from kafka.structs import TopicPartitionReplica

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import alter_replica_log_dirs as ar
from pydmq.protocol.messages import describe_log_dirs as dl
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

TOPIC = "dirs"
BATCH = build_batch([SimpleRecord(b"k", b"v" * 100)] * 3)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("dirs") / "d") as b:
        b.broker.topic_creator.create_topic(TOPIC, 2)
        with RawClient(b.bootstrap) as client:
            request = pr.ProduceRequest(
                acks=-1,
                timeout=5000,
                topic_data=[
                    pr.TopicProduceData(
                        name=TOPIC, partition_data=[pr.PartitionProduceData(index=0, records=BATCH)]
                    )
                ],
            )
            answer = client.request(0, 9, request).body
            assert answer.responses[0].partition_responses[0].error_code == 0
        yield b


def _log_dir(b: EmbeddedBroker) -> str:
    return os.path.abspath(b.broker.log_dir)


def test_advertised_as_kafka_4(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        body = client.request(
            18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")
        ).body
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[34] == (1, 2) and ranges[35] == (1, 4)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_named_partitions(broker: EmbeddedBroker, version: int) -> None:
    request = dl.DescribeLogDirsRequest(
        topics=[
            dl.DescribableLogDirTopic(topic=TOPIC, partitions=[0, 1, 7]),
            dl.DescribableLogDirTopic(topic="unknown", partitions=[0]),
        ]
    )
    with RawClient(broker.bootstrap) as client:
        body = client.request(35, version, request).body
    (result,) = body.results
    assert result.error_code == ErrorCode.NONE
    assert result.log_dir == _log_dir(broker)
    assert [t.name for t in result.topics] == [TOPIC]
    sizes = {
        p.partition_index: (p.partition_size, p.offset_lag) for p in result.topics[0].partitions
    }
    assert sizes == {0: (len(BATCH), 0), 1: (0, 0)}
    if version >= 4:
        stats = os.statvfs(result.log_dir)
        assert result.total_bytes == stats.f_blocks * stats.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes
    else:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)  # not in the encoding


def test_describe_all_and_none(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        everything = client.request(35, 4, dl.DescribeLogDirsRequest(topics=None)).body
        nothing = client.request(35, 4, dl.DescribeLogDirsRequest(topics=[])).body
    assert TOPIC in {t.name for t in everything.results[0].topics}
    assert nothing.results[0].topics == [] and nothing.results[0].error_code == 0


def test_alter_to_its_own_dir_or_another(broker: EmbeddedBroker) -> None:
    def alter(path: str) -> dict[tuple[str, int], int]:
        request = ar.AlterReplicaLogDirsRequest(
            dirs=[
                ar.AlterReplicaLogDir(
                    path=path,
                    topics=[
                        ar.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0, 9]),
                        ar.AlterReplicaLogDirTopic(name="unknown", partitions=[0]),
                    ],
                )
            ]
        )
        with RawClient(broker.bootstrap) as client:
            body = client.request(34, 2, request).body
        return {
            (t.topic_name, p.partition_index): p.error_code
            for t in body.results
            for p in t.partitions
        }

    assert alter(_log_dir(broker)) == {
        (TOPIC, 0): ErrorCode.NONE,
        (TOPIC, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("unknown", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    elsewhere = alter(f"/tmp/pydmq-no-such-dir-{uuid.uuid4().hex}")
    assert set(elsewhere.values()) == {ErrorCode.LOG_DIR_NOT_FOUND} and len(elsewhere) == 3


def test_kafka_python_admin(broker: EmbeddedBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        (described,) = admin.describe_log_dirs()
        (entry,) = described["log_dirs"]
        assert entry["log_dir"] == _log_dir(broker) and entry["error_code"] == 0
        assert TOPIC in {t["name"] for t in entry["topics"]}
        replica = TopicPartitionReplica(TOPIC, 0, broker.broker.node_id)
        moved = admin.alter_replica_log_dirs({replica: "/elsewhere"})
        assert moved == {replica: LogDirNotFoundError}
        stays = admin.alter_replica_log_dirs({replica: _log_dir(broker)})
        assert stays == {replica: NoError}
    finally:
        admin.close()
