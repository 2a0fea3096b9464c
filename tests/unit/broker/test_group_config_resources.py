"""GROUP config resources (type 32, Kafka 4.x's GroupConfig) on one embedded node, over the
wire: IncrementalAlterConfigs and AlterConfigs set and check a group id's configs,
DescribeConfigs shows them with their sources, they survive a restart (ConfigRecords in the
metadata log), and a share group applies ``share.auto.offset.reset`` and
``share.record.lock.duration.ms``."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import alter_configs as ac
from pydmq.protocol.messages import describe_configs as dc
from pydmq.protocol.messages import incremental_alter_configs as iac
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages import share_fetch as sf
from pydmq.protocol.messages import share_group_heartbeat as sh
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(30)

GROUP = 32
TOPIC = "grouped"


def _set(
    client: RawClient, group: str, *changes: tuple[str, int, str | None]
) -> iac.AlterConfigsResourceResponse:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=GROUP,
                resource_name=group,
                configs=[
                    iac.AlterableConfig(name=n, config_operation=op, value=v)
                    for n, op, v in changes
                ],
            )
        ]
    )
    (answer,) = client.request(44, 1, request).body.responses
    result: iac.AlterConfigsResourceResponse = answer
    return result


def _describe(client: RawClient, group: str) -> dict[str, tuple[str | None, int]]:
    request = dc.DescribeConfigsRequest(
        resources=[dc.DescribeConfigsResource(resource_type=GROUP, resource_name=group)]
    )
    (result,) = client.request(32, 4, request).body.results
    assert result.error_code == 0
    return {c.name: (c.value, c.config_source) for c in result.configs}


def test_set_check_describe_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    with EmbeddedBroker(data_dir) as b, RawClient(b.bootstrap) as client:
        defaults = _describe(client, "never-seen")  # a group need not exist
        assert defaults["share.auto.offset.reset"] == ("latest", 5)
        assert defaults["share.record.lock.duration.ms"] == ("30000", 5)
        assert defaults["consumer.session.timeout.ms"] == ("45000", 5)
        assert defaults["share.isolation.level"] == ("read_uncommitted", 5)
        ok = _set(
            client,
            "g1",
            ("share.auto.offset.reset", 0, "earliest"),
            ("share.record.lock.duration.ms", 0, "15000"),
        )
        assert ok.error_code == 0
        for bad in (
            ("share.auto.offset.reset", 0, "sometimes"),
            ("share.auto.offset.reset", 0, "by_duration:1H"),
            ("share.record.lock.duration.ms", 0, "14999"),
            ("share.heartbeat.interval.ms", 0, "60000"),
            ("share.isolation.level", 0, "dirty"),
            ("no.such.config", 0, "1"),
        ):
            assert _set(client, "g1", bad).error_code == ErrorCode.INVALID_CONFIG, bad
        assert _set(client, "g1", ("share.auto.offset.reset", 2, "x")).error_code == (
            ErrorCode.INVALID_REQUEST
        )
        assert (
            _set(client, "g2", ("share.auto.offset.reset", 0, "by_duration:PT1H")).error_code == 0
        )
        legacy = ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsResource(
                    resource_type=GROUP,
                    resource_name="g3",
                    configs=[
                        ac.AlterableConfig(name="share.isolation.level", value="read_committed")
                    ],
                )
            ]
        )
        assert client.request(33, 2, legacy).body.responses[0].error_code == 0
    with EmbeddedBroker(data_dir) as b, RawClient(b.bootstrap) as client:
        g1 = _describe(client, "g1")
        assert g1["share.auto.offset.reset"] == ("earliest", 8)
        assert g1["share.record.lock.duration.ms"] == ("15000", 8)
        assert g1["share.session.timeout.ms"] == ("45000", 5)
        assert _describe(client, "g3")["share.isolation.level"] == ("read_committed", 8)
        assert _set(client, "g1", ("share.auto.offset.reset", 1, None)).error_code == 0
        assert _describe(client, "g1")["share.auto.offset.reset"] == ("latest", 5)


def _produce(client: RawClient, count: int) -> None:
    produce = pr.ProduceRequest(
        acks=-1,
        timeout=5000,
        topic_data=[
            pr.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    pr.PartitionProduceData(
                        index=0, records=build_batch([SimpleRecord(b"k", b"v")] * count)
                    )
                ],
            )
        ],
    )
    assert client.request(0, 9, produce).body.responses[0].partition_responses[0].error_code == 0


def _first_fetch(client: RawClient, group: str, topic_id: uuid.UUID) -> list[tuple[int, int]]:
    member = uuid.uuid4().hex
    join = sh.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[TOPIC]
    )
    assert client.request(76, 1, join).body.error_code == 0
    fetch = sf.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=0,
        max_wait=0,
        max_records=100,
        topics=[
            sf.FetchTopic(topic_id=topic_id, partitions=[sf.FetchPartition(partition_index=0)])
        ],
    )
    (data,) = client.request(78, 1, fetch).body.responses[0].partitions
    return [(a.first_offset, a.last_offset) for a in data.acquired_records]


def test_share_groups_apply_the_auto_offset_reset_and_lock_duration(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as b, RawClient(b.bootstrap) as client:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        topic_id = b.broker.topics.get(TOPIC).topic_id
        _produce(client, 3)
        assert _set(client, "early", ("share.auto.offset.reset", 0, "earliest")).error_code == 0
        assert (
            _set(client, "recent", ("share.auto.offset.reset", 0, "by_duration:PT1H")).error_code
            == 0
        )
        assert _set(client, "early", ("share.record.lock.duration.ms", 0, "20000")).error_code == 0
        assert _first_fetch(client, "late", topic_id) == []  # latest: the default
        assert _first_fetch(client, "early", topic_id) == [(0, 2)]
        assert _first_fetch(client, "recent", topic_id) == [(0, 2)]  # produced just now
        shares = b.broker.share_groups.partitions
        assert shares.get("early", topic_id, 0).limits.record_lock_duration_ms == 20000
        assert shares.get("late", topic_id, 0).limits.record_lock_duration_ms == 30000
