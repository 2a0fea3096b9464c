"""Dynamic broker configs on a single node (issue 23): DescribeConfigs of a BROKER resource
lists every broker config Kafka 4.4 lists (on 3209cc2 ``log.cleaner.backoff.ms`` of broker
"1" was missing), and IncrementalAlterConfigs/AlterConfigs on BROKER resources (this node,
and the cluster default "") are accepted as Kafka accepts them (INVALID_REQUEST on 3209cc2),
applied at once to the topics that take their defaults from the broker, and persisted
across a restart. Answers and messages as observed on Kafka 4.4."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import alter_configs as ac
from pydmq.protocol.messages import describe_configs as dc
from pydmq.protocol.messages import incremental_alter_configs as iac
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

SET, DELETE, APPEND = 0, 1, 2
DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "d"


@pytest.fixture
def broker(data_dir: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir, overrides={"num.io.threads": 16}) as b:
        b.broker.topic_creator.create_topic("plain", 1)
        b.broker.topic_creator.create_topic("own", 1, configs={"retention.ms": "1000"})
        yield b


def alter(
    b: EmbeddedBroker, name: str, *ops: tuple[str, int, str | None]
) -> tuple[int, str | None]:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=4,
                resource_name=name,
                configs=[
                    iac.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ],
            )
        ]
    )
    with RawClient(b.bootstrap) as client:
        (result,) = client.request(44, 1, request).body.responses
    return int(result.error_code), result.error_message


def describe(b: EmbeddedBroker, kind: int, name: str, keys: list[str] | None = None) -> dict:
    request = dc.DescribeConfigsRequest(
        resources=[
            dc.DescribeConfigsResource(
                resource_type=kind, resource_name=name, configuration_keys=keys
            )
        ],
        include_synonyms=True,
    )
    with RawClient(b.bootstrap) as client:
        (result,) = client.request(32, 4, request).body.results
    assert result.error_code == 0, result.error_message
    return {
        e.name: (e.value, e.config_source, e.read_only, [(s.value, s.source) for s in e.synonyms])
        for e in result.configs
    }


def test_broker_lists_kafka_only_configs_with_defaults(broker: EmbeddedBroker) -> None:
    configs = describe(broker, 4, "1")
    assert configs["log.cleaner.backoff.ms"] == ("15000", DEFAULT, False, [("15000", DEFAULT)])
    assert configs["num.io.threads"] == ("16", STATIC, False, [("16", STATIC), ("8", DEFAULT)])
    assert configs["ssl.keystore.password"][0] is None  # sensitive
    assert configs["num.partitions"][2] is True  # read-only, as in Kafka
    assert describe(broker, 4, "") == {}


def test_per_broker_and_cluster_default_apply_to_topics_at_once(broker: EmbeddedBroker) -> None:
    assert alter(broker, "", ("log.retention.ms", SET, "5000")) == (0, None)
    assert alter(broker, "1", ("log.retention.ms", SET, "7000")) == (0, None)
    broker_view = describe(broker, 4, "1", ["log.retention.ms"])["log.retention.ms"]
    assert broker_view == (
        "7000",
        DYNAMIC_BROKER,
        False,
        [("7000", DYNAMIC_BROKER), ("5000", DYNAMIC_DEFAULT), ("168", DEFAULT)],
    )
    assert describe(broker, 4, "")["log.retention.ms"][:2] == ("5000", DYNAMIC_DEFAULT)
    plain = describe(broker, 2, "plain", ["retention.ms"])["retention.ms"]
    assert plain[:2] == ("7000", DYNAMIC_BROKER)
    assert describe(broker, 2, "own", ["retention.ms"])["retention.ms"][0] == "1000"
    (partition,) = [
        p for tp, p in broker.broker.replica_manager.partitions.items() if tp.topic == "plain"
    ]
    assert partition.log.engine_log.config.retention_ms == 7000
    assert alter(broker, "1", ("log.retention.ms", DELETE, None)) == (0, None)
    assert describe(broker, 2, "plain", ["retention.ms"])["retention.ms"][:2] == (
        "5000",
        DYNAMIC_DEFAULT,
    )


def test_refusals_as_kafka(broker: EmbeddedBroker) -> None:
    assert alter(broker, "1", ("num.partitions", SET, "5")) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: [num.partitions]",
    )
    assert alter(broker, "1", ("log.cleaner.backoff.ms", SET, "abc")) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid value abc for configuration log.cleaner.backoff.ms: Not a number of type LONG",
    )
    assert alter(broker, "1", ("log.cleaner.backoff.ms", APPEND, "1")) == (
        ErrorCode.INVALID_CONFIG,
        "Config value append is not allowed for config key: log.cleaner.backoff.ms",
    )
    assert alter(broker, "7", ("log.cleaner.backoff.ms", SET, "1")) == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 1, but received 7",
    )
    assert alter(broker, "1", ("custom.key", SET, "x")) == (0, None)  # Kafka keeps custom keys
    assert describe(broker, 4, "1", ["custom.key"])["custom.key"] == (
        None,
        DYNAMIC_BROKER,
        True,
        [(None, DYNAMIC_BROKER)],
    )


def test_legacy_alter_configs_replaces_the_layer(broker: EmbeddedBroker) -> None:
    assert alter(broker, "1", ("log.cleaner.backoff.ms", SET, "20000")) == (0, None)

    def legacy(configs: dict[str, str]) -> int:
        request = ac.AlterConfigsRequest(
            resources=[
                ac.AlterConfigsResource(
                    resource_type=4,
                    resource_name="1",
                    configs=[ac.AlterableConfig(name=k, value=v) for k, v in configs.items()],
                )
            ]
        )
        with RawClient(broker.bootstrap) as client:
            (result,) = client.request(33, 2, request).body.responses
        return int(result.error_code)

    assert legacy({"log.cleaner.threads": "2"}) == 0
    configs = describe(broker, 4, "1", ["log.cleaner.backoff.ms", "log.cleaner.threads"])
    assert configs["log.cleaner.backoff.ms"][:2] == ("15000", DEFAULT)
    assert configs["log.cleaner.threads"][:2] == ("2", DYNAMIC_BROKER)


def test_persisted_across_a_restart(data_dir: Path) -> None:
    with EmbeddedBroker(data_dir) as b:
        b.broker.topic_creator.create_topic("plain", 1)
        assert alter(b, "", ("log.segment.bytes", SET, "2000000")) == (0, None)
        assert alter(b, "1", ("log.cleaner.backoff.ms", SET, "20000")) == (0, None)
    with EmbeddedBroker(data_dir) as b:
        configs = describe(b, 4, "1", ["log.segment.bytes", "log.cleaner.backoff.ms"])
        assert configs["log.segment.bytes"][:2] == ("2000000", DYNAMIC_DEFAULT)
        assert configs["log.cleaner.backoff.ms"][:2] == ("20000", DYNAMIC_BROKER)
        assert describe(b, 2, "plain", ["segment.bytes"])["segment.bytes"][:2] == (
            "2000000",
            DYNAMIC_DEFAULT,
        )


# Issue 16 part 1: the configs are ConfigRecords of the node's metadata log. On 4a2e8d9 they
# lived in __pydmq_metadata/dynamic_broker_configs.json, which these tests check is converted
# once and then no longer used.


def test_the_json_file_of_earlier_releases_is_converted_once(data_dir: Path) -> None:
    metadata_dir = data_dir / "__pydmq_metadata"
    metadata_dir.mkdir(parents=True)
    legacy = metadata_dir / "dynamic_broker_configs.json"
    legacy.write_text(
        json.dumps(
            {
                "cluster_default": {"log.retention.ms": "5000"},
                "broker": {"log.cleaner.backoff.ms": "20000", "custom.key": "x"},
            }
        )
    )
    with EmbeddedBroker(data_dir) as b:
        image = b.broker.local_controller.image
        assert image.broker_config("") == {"log.retention.ms": "5000"}
        assert image.broker_config("1") == {"log.cleaner.backoff.ms": "20000", "custom.key": "x"}
        configs = describe(b, 4, "1", ["log.retention.ms", "log.cleaner.backoff.ms"])
        assert configs["log.retention.ms"][:2] == ("5000", DYNAMIC_DEFAULT)
        assert configs["log.cleaner.backoff.ms"][:2] == ("20000", DYNAMIC_BROKER)
        b.broker.topic_creator.create_topic("plain", 1)
        assert alter(b, "1", ("log.cleaner.backoff.ms", DELETE, None)) == (0, None)
    assert not legacy.exists()
    assert json.loads(legacy.with_name(legacy.name + ".converted").read_text())["broker"]
    with EmbeddedBroker(data_dir) as b:  # the log, not the backup, is read
        configs = describe(b, 4, "1", ["log.retention.ms", "log.cleaner.backoff.ms"])
        assert configs["log.retention.ms"][:2] == ("5000", DYNAMIC_DEFAULT)
        assert configs["log.cleaner.backoff.ms"][:2] == ("15000", DEFAULT)
        assert describe(b, 2, "plain", ["retention.ms"])["retention.ms"][:2] == (
            "5000",
            DYNAMIC_DEFAULT,
        )
    assert not legacy.exists()


def test_a_refused_metadata_log_write_keeps_the_old_values(
    data_dir: Path, arm_failpoints: Callable[[str], None]
) -> None:
    with EmbeddedBroker(data_dir) as b:
        b.broker.topic_creator.create_topic("plain", 1)
        assert alter(b, "", ("log.retention.ms", SET, "5000")) == (0, None)
        arm_failpoints("raft.append.write=short")
        code, message = alter(b, "", ("log.retention.ms", SET, "9000"))
        assert code == ErrorCode.KAFKA_STORAGE_ERROR
        assert message is not None and message.startswith("The metadata log refused the change")
        assert describe(b, 4, "1", ["log.retention.ms"])["log.retention.ms"][0] == "5000"
        arm_failpoints("")
    with EmbeddedBroker(data_dir) as b:
        assert describe(b, 4, "1", ["log.retention.ms"])["log.retention.ms"][:2] == (
            "5000",
            DYNAMIC_DEFAULT,
        )
        (partition,) = [
            p for tp, p in b.broker.replica_manager.partitions.items() if tp.topic == "plain"
        ]
        assert partition.log.engine_log.config.retention_ms == 5000
    assert not (data_dir / "__pydmq_metadata" / "dynamic_broker_configs.json").exists()
