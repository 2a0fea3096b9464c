"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against an in-process broker.

Driven by confluent-kafka's AdminClient and kafka-python's KafkaAdminClient (real clients),
plus a raw client for the corners the clients hide (synonym order, versions, config types).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

TIMEOUT = 15


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data = tmp_path_factory.mktemp("admin-configs") / "d"
    with EmbeddedBroker(data, overrides={"log.retention.minutes": "120"}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _topic(admin: AdminClient, config: dict[str, str] | None = None, partitions: int = 1) -> str:
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(TIMEOUT)
    return name


def _describe(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    result: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return result


def _incremental(
    admin: AdminClient, name: str, *entries: ConfigEntry, validate: bool = False
) -> None:
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
    admin.incremental_alter_configs([resource], validate_only=validate)[resource].result(TIMEOUT)


def _error_code(exc: pytest.ExceptionInfo[KafkaException]) -> int:
    return int(exc.value.args[0].code())


# -- DescribeConfigs -----------------------------------------------------------------------
def test_describe_topic_lists_every_config_with_sources(
    admin: AdminClient, broker: EmbeddedBroker
) -> None:
    from pydmq.config.topic import TopicConfig

    name = _topic(admin, {"segment.ms": "3600000", "cleanup.policy": "compact"})
    configs = _describe(admin, name)
    assert set(configs) == {d.name for d in TopicConfig.definitions()}
    assert configs["segment.ms"].value == "3600000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    # retention.ms comes from the broker's log.retention.minutes=120 (a static broker config)
    assert configs["retention.ms"].value == str(120 * 60000)
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["delete.retention.ms"].value == "86400000"
    assert configs["delete.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    assert not configs["retention.ms"].is_read_only
    assert not configs["retention.ms"].is_sensitive


def test_describe_topic_synonyms_types_and_docs(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, {"retention.ms": "5000"})
    resource = DescribeConfigsResource(
        resource_type=2,
        resource_name=name,
        configuration_keys=["retention.ms", "segment.ms", "nope"],
    )
    request = DescribeConfigsRequest(
        resources=[resource], include_synonyms=True, include_documentation=True
    )
    with RawClient(broker.bootstrap) as raw:
        body = raw.request(32, 4, request).body
        old = raw.request(32, 1, request).body
    (result,) = body.results
    assert result.error_code == ErrorCode.NONE
    by_name = {c.name: c for c in result.configs}
    assert set(by_name) == {"retention.ms", "segment.ms"}  # unknown keys are left out
    retention = by_name["retention.ms"]
    assert retention.value == "5000" and retention.config_source == 1
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "5000", 1),
        ("log.retention.minutes", "120", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert retention.config_type == 5  # LONG
    assert retention.documentation
    segment = by_name["segment.ms"]
    assert segment.config_source == 5
    assert [(s.name, s.source) for s in segment.synonyms] == [("log.roll.hours", 5)]
    # v1 has synonyms but neither types nor documentation
    (old_result,) = old.results
    assert {c.name: c.value for c in old_result.configs} == {
        "retention.ms": "5000",
        "segment.ms": "604800000",
    }
    assert old_result.configs[0].synonyms


def test_describe_unknown_topic_and_bad_resources(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    with pytest.raises(KafkaException) as exc:
        _describe(admin, "no-such-topic-anywhere")
    assert _error_code(exc) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=4, resource_name="77", configuration_keys=None),
            DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None),
            DescribeConfigsResource(resource_type=3, resource_name="g", configuration_keys=None),
            DescribeConfigsResource(
                resource_type=2, resource_name="bad name!", configuration_keys=None
            ),
        ]
    )
    with RawClient(broker.bootstrap) as raw:
        results = raw.request(32, 4, request).body.results
    assert [r.error_code for r in results] == [
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ]
    assert results[1].configs == []  # no cluster-wide dynamic broker defaults


def test_describe_broker_configs(broker: EmbeddedBroker, admin: AdminClient) -> None:
    from pydmq.config.broker import BROKER_CONFIGS
    from pydmq.config.kafka_broker_defs import kafka_only_configs

    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    assert set(configs) == {d.name for d in BROKER_CONFIGS} | set(kafka_only_configs())
    assert configs["log.retention.minutes"].value == "120"
    assert configs["log.retention.minutes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["node.id"].is_read_only
    assert configs["log.retention.ms"].value is None
    # kafka-python's admin client reads the same data
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        described = kp.describe_configs(
            [KPConfigResource(ConfigResourceType.BROKER, "1")], config_filter="all"
        )
        entries = described["broker"]["1"]
        assert entries["log.retention.minutes"]["value"] == "120"
        assert entries["log.retention.minutes"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert entries["log.retention.ms"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert entries["node.id"]["read_only"] is True
    finally:
        kp.close()


def test_describe_broker_logger(broker: EmbeddedBroker) -> None:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=8, resource_name="1", configuration_keys=None)
        ]
    )
    with RawClient(broker.bootstrap) as raw:
        (result,) = raw.request(32, 4, request).body.results
    assert result.error_code == ErrorCode.NONE
    assert result.configs[0].name == "root"
    assert result.configs[0].config_source == 6


# -- IncrementalAlterConfigs ---------------------------------------------------------------
def test_incremental_set_delete_append_subtract(broker: EmbeddedBroker, admin: AdminClient) -> None:
    name = _topic(admin, partitions=2)
    _incremental(
        admin,
        name,
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
    )
    configs = _describe(admin, name)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # the change reaches the partition logs and their append policy
    inner = broker.broker
    from pydmq.storage.api import TopicPartition

    partition = inner.replica_manager.get(TopicPartition(name, 1))  # type: ignore[attr-defined]
    assert partition.log.engine_log.config.retention_ms == 60000
    _incremental(
        admin,
        name,
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
    )
    assert partition.policy.max_message_bytes == 2000

    _incremental(
        admin,
        name,
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    )
    assert _describe(admin, name)["cleanup.policy"].value == "delete,compact"
    _incremental(
        admin,
        name,
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
    )
    assert _describe(admin, name)["cleanup.policy"].value == "compact"

    _incremental(
        admin,
        name,
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    )
    configs = _describe(admin, name)
    assert configs["retention.ms"].value == str(120 * 60000)
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert partition.log.engine_log.config.retention_ms == 120 * 60000
    assert configs["cleanup.policy"].value == "compact"  # untouched by the other edits

    # validate_only changes nothing
    _incremental(
        admin,
        name,
        ConfigEntry("segment.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        validate=True,
    )
    assert _describe(admin, name)["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (
            ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            ConfigEntry("cleanup.policy", "shred", incremental_operation=AlterConfigOpType.SET),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            ConfigEntry("pydmq.engine", "memory", incremental_operation=AlterConfigOpType.SET),
            ErrorCode.INVALID_CONFIG,
        ),
    ],
)
def test_incremental_invalid(admin: AdminClient, entry: ConfigEntry, code: int) -> None:
    name = _topic(admin)
    with pytest.raises(KafkaException) as exc:
        _incremental(admin, name, entry)
    assert _error_code(exc) == code
    sources = {k: v.source for k, v in _describe(admin, name).items()}
    assert ConfigSource.DYNAMIC_TOPIC_CONFIG.value not in sources.values()


def test_incremental_unknown_topic_and_raw_errors(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    with pytest.raises(KafkaException) as exc:
        _incremental(
            admin,
            "missing-topic-xyz",
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
        )
    assert _error_code(exc) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    name = _topic(admin)
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[AlterableConfig(name="retention.ms", config_operation=9, value="1")],
            ),
            AlterConfigsResource(
                resource_type=4,
                resource_name="1",
                configs=[AlterableConfig(name="num.partitions", config_operation=0, value="3")],
            ),
            AlterConfigsResource(resource_type=2, resource_name="dup", configs=[]),
            AlterConfigsResource(resource_type=2, resource_name="dup", configs=[]),
            AlterConfigsResource(
                resource_type=2,
                resource_name=name + "x",
                configs=[AlterableConfig(name="retention.ms", config_operation=0, value=None)],
            ),
        ]
    )
    with RawClient(broker.bootstrap) as raw:
        responses = raw.request(44, 1, request).body.responses
    assert [r.error_code for r in responses] == [ErrorCode.INVALID_REQUEST] * 4 + [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ]


# -- AlterConfigs (legacy, full replacement) -------------------------------------------------
def test_alter_configs_replaces_the_explicit_set(
    broker: EmbeddedBroker, admin: AdminClient
) -> None:
    name = _topic(admin, {"retention.ms": "1000", "segment.ms": "2000"})
    resource = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "5000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = _describe(admin, name)
    assert configs["segment.ms"].value == "5000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value  # reverted

    bad = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "zero"})
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([bad])[bad].result(TIMEOUT)
    assert _error_code(exc) == ErrorCode.INVALID_CONFIG
    missing = ConfigResource(
        ResourceType.TOPIC, "missing-topic-abc", set_config={"segment.ms": "5000"}
    )
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([missing])[missing].result(TIMEOUT)
    assert _error_code(exc) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    validate = ConfigResource(ResourceType.TOPIC, name, set_config={"segment.ms": "7000"})
    admin.alter_configs([validate], validate_only=True)[validate].result(TIMEOUT)
    assert _describe(admin, name)["segment.ms"].value == "5000"
    brokers = ConfigResource(ResourceType.BROKER, "1", set_config={"num.partitions": "3"})
    with pytest.raises(KafkaException) as exc:
        admin.alter_configs([brokers])[brokers].result(TIMEOUT)
    assert _error_code(exc) == ErrorCode.INVALID_REQUEST


def test_kafka_python_alter_and_describe(broker: EmbeddedBroker, admin: AdminClient) -> None:
    from kafka.admin import ConfigResource as KPConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    name = _topic(admin)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        for incremental in (True, False):  # IncrementalAlterConfigs, then legacy AlterConfigs
            value = "12345" if incremental else "777"
            result = kp.alter_configs(
                [
                    KPConfigResource(
                        ConfigResourceType.TOPIC, name, configs={"retention.bytes": value}
                    )
                ],
                incremental=incremental,
            )
            assert result == {"topic": {name: "OK"}}
            described = kp.describe_configs([KPConfigResource(ConfigResourceType.TOPIC, name)])
            modified = described["topic"][name]  # the client's default filter: non-default only
            assert set(modified) == {"retention.bytes"}
            assert modified["retention.bytes"]["value"] == value
            assert modified["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    finally:
        kp.close()
