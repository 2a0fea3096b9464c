"""The pytest11 plugin's fixtures give a real broker to users' tests."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pydmq.testing import EmbeddedBroker
from pydmq.testing.process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, ConfigResource  # noqa: E402


def _roundtrip(bootstrap: str, topic: str, count: int = 20) -> list[bytes]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"m%d" % i, partition=0)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: list[bytes] = []
    while len(seen) < count:
        msg = consumer.poll(5)
        assert msg is not None, f"only {len(seen)} records came back"
        assert not msg.error(), msg.error()
        seen.append(msg.value())
    consumer.close()
    return seen


def test_plugin_is_registered(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.pluginmanager.has_plugin("pydmq")


def test_pydmq_bootstrap_fixture(pydmq_bootstrap: str) -> None:
    assert _roundtrip(pydmq_bootstrap, "fixture-topic") == [b"m%d" % i for i in range(20)]


@pytest.mark.pydmq_config({"num.partitions": 3})
def test_config_marker_reaches_the_broker(pydmq_broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": pydmq_broker.bootstrap})
    _roundtrip(pydmq_broker.bootstrap, "auto-created", 1)
    metadata = admin.list_topics("auto-created", timeout=10)
    assert len(metadata.topics["auto-created"].partitions) == 3


def test_process_fixture_survives_kill_and_restart(pydmq_broker_process: BrokerProcess) -> None:
    bootstrap = pydmq_broker_process.bootstrap
    assert _roundtrip(bootstrap, "durable", 10) == [b"m%d" % i for i in range(10)]
    pydmq_broker_process.kill(signal.SIGKILL)
    pydmq_broker_process.start()
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("durable", 0, 0)])
    values = []
    for _ in range(10):
        msg = consumer.poll(10)
        assert msg is not None and not msg.error()
        values.append(msg.value())
    consumer.close()
    assert values == [b"m%d" % i for i in range(10)]


def test_ipv6_loopback_listener(tmp_path: Path) -> None:
    """PITFALLS #19: a broker on ::1 advertises a host clients can reach."""
    with EmbeddedBroker(tmp_path / "v6", host="::1") as broker:
        assert broker.bootstrap.startswith("[::1]:")
        assert _roundtrip(broker.bootstrap, "over-ipv6", 5) == [b"m%d" % i for i in range(5)]


def _broker_config(bootstrap: str, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    return str(configs[name].value)


def test_fixtures_skip_the_initial_rebalance_delay(
    pydmq_broker: EmbeddedBroker, pydmq_broker_process: BrokerProcess
) -> None:
    """Kafka's test harness sets group.initial.rebalance.delay.ms=0; so do the fixtures."""
    for bootstrap in (pydmq_broker.bootstrap, pydmq_broker_process.bootstrap):
        assert _broker_config(bootstrap, "group.initial.rebalance.delay.ms") == "0"


@pytest.mark.pydmq_config({"group.initial.rebalance.delay.ms": 3000})
def test_marker_restores_the_rebalance_delay(pydmq_broker: EmbeddedBroker) -> None:
    assert _broker_config(pydmq_broker.bootstrap, "group.initial.rebalance.delay.ms") == "3000"
