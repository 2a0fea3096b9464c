"""A Kafka ``server.properties`` loads as it is: pydmq's properties are honoured, Kafka's
others are accepted with one warning, unknown keys are refused with a suggestion; ``pydmq
serve --config`` starts from the file Kafka 4.x ships."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.client import KafkaClient
from pydmq.config.broker import BROKER_CONFIGS, BrokerConfig, load_properties
from pydmq.config.definitions import ConfigError
from pydmq.config.kafka_only import KAFKA_ONLY, kafka_only_reason
from pydmq.testing.process import free_port

REPO = Path(__file__).resolve().parents[3]


def kafka4_server_properties(log_dir: Path, port: int = 9092, controller_port: int = 9093) -> str:
    """The settings of the config/server.properties Kafka 4.x ships (a combined
    broker+controller node that is its own standalone quorum), on loopback."""
    return f"""
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={log_dir}
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


KAFKA4_WITHOUT_EFFECT = {
    "controller.quorum.bootstrap.servers",
    "num.network.threads",
    "num.io.threads",
    "num.recovery.threads.per.data.dir",
}


def test_kafka4_server_properties_load(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(kafka4_server_properties(tmp_path / "logs"))
    config = BrokerConfig(load_properties(path))
    assert set(config.without_effect) == KAFKA4_WITHOUT_EFFECT
    # the ones with a meaning are honoured
    assert config.node_id == 1 and not config.is_cluster_mode
    assert config.log_dir == tmp_path / "logs"
    assert config.get_int("offsets.topic.replication.factor") == 1
    assert config.listeners[1] == "CONTROLLER://127.0.0.1:9093"
    warning = config.without_effect_warning()
    assert warning is not None
    assert warning.startswith("4 Kafka broker properties have no effect in pydmq")
    for name in KAFKA4_WITHOUT_EFFECT:
        assert warning.count(name) == 1
    # one line per reason
    reasons = {kafka_only_reason(name) for name in KAFKA4_WITHOUT_EFFECT}
    assert len(warning.splitlines()) == 1 + len(reasons)


def test_kafka3_zookeeper_properties_load() -> None:
    """A Kafka 3.x (ZooKeeper mode) file: broker.id is Kafka's synonym of node.id."""
    config = BrokerConfig(
        {
            "broker.id": "0",
            "zookeeper.connect": "localhost:2181",
            "zookeeper.connection.timeout.ms": "18000",
            "inter.broker.protocol.version": "3.7",
            "log.message.format.version": "3.0",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "3",
        }
    )
    assert config.node_id == 0
    assert config.get_int("group.initial.rebalance.delay.ms") == 0
    assert "Kafka 3.x settings that Kafka 4 removed" in config.without_effect["zookeeper.connect"]
    assert BrokerConfig({}).without_effect_warning() is None
    assert BrokerConfig({"node.id": 4, "broker.id": 4}).node_id == 4
    assert BrokerConfig({}).node_id == 1
    with pytest.raises(ConfigError, match=r"broker\.id 2 and node\.id 3 differ"):
        BrokerConfig({"node.id": 3, "broker.id": 2})


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("num.io.thread", "num.io.threads"),  # a Kafka property without effect
        ("log.retension.ms", "log.retention.ms"),  # a pydmq property
        ("auto.create.topic.enable", "auto.create.topics.enable"),
    ],
)
def test_misspelled_keys_are_refused_with_a_suggestion(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as refused:
        BrokerConfig({key: "1"})
    message = str(refused.value)
    assert f"unknown broker property {key!r}; did you mean {suggestion!r}?" in message
    assert "pydmq config list" in message


def test_unknown_key_without_a_close_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown broker property 'frobnicate' \(neither"):
        BrokerConfig({"frobnicate": "1"})


def test_prefixed_kafka_properties() -> None:
    config = BrokerConfig(
        {
            "listener.name.internal.sasl.login.callback.handler.class": "x.Handler",
            "zookeeper.ssl.client.enable": "false",
            "rsm.config.dir": "/tiered",
            "config.providers.file.class": "x",
        }
    )
    assert len(config.without_effect) == 4


def test_listeners_of_kafkas_four_security_protocols_only() -> None:
    for protocol in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        BrokerConfig(
            {
                "listeners": "EXTERNAL://127.0.0.1:9093",
                "listener.security.protocol.map": f"EXTERNAL:{protocol}",
            }
        )
    with pytest.raises(ConfigError, match="listener EXTERNAL uses security protocol GSSAPI"):
        BrokerConfig(
            {
                "listeners": "EXTERNAL://127.0.0.1:9093",
                "listener.security.protocol.map": "EXTERNAL:GSSAPI",
            }
        )
    # a map naming protocols no listener uses is fine (Kafka's shipped file has one)
    config = BrokerConfig(
        {
            "listeners": "EXTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,SSL:SSL",
            "ssl.keystore.location": "/k.jks",
        }
    )
    assert not config.without_effect  # ssl.* is honoured (by SSL listeners)


def test_quorum_bootstrap_servers() -> None:
    listeners = "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    standalone = {"listeners": listeners, "controller.quorum.bootstrap.servers": "localhost:9093"}
    assert not BrokerConfig(standalone).is_cluster_mode
    for bad in (
        {**standalone, "controller.quorum.bootstrap.servers": "a:9093,b:9093,c:9093"},
        {**standalone, "controller.quorum.bootstrap.servers": "localhost:19093"},
        {**standalone, "process.roles": "broker"},
    ):
        with pytest.raises(ConfigError, match=r"controller\.quorum\.voters"):
            BrokerConfig(bad)
    # with static voters the bootstrap servers add nothing
    config = BrokerConfig(
        {
            **standalone,
            "controller.quorum.bootstrap.servers": "a:9093,b:9093",
            "controller.quorum.voters": "1@127.0.0.1:9093",
        }
    )
    assert config.is_cluster_mode and "controller.quorum.bootstrap.servers" in config.without_effect


def test_the_table_does_not_shadow_pydmq_properties() -> None:
    defined = {d.name for d in BROKER_CONFIGS}
    for group in KAFKA_ONLY:
        assert not group.names & defined
        assert not any(name.startswith(group.prefixes) for name in defined)


@pytest.mark.timeout(120)
def test_every_property_of_the_reference_kafka_is_accepted() -> None:
    """Every broker property the reference Apache Kafka documents (compat/kafka/dist; its
    ``kafka.server.KafkaConfig`` prints the broker config reference) loads."""
    dist = REPO / "compat" / "kafka" / "dist"
    if not list(dist.glob("kafka_2.13-*.jar")):
        pytest.skip("no reference Kafka jars in compat/kafka/dist (compat/kafka/start.sh)")
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on PATH")
    reference = subprocess.run(
        [java, "-cp", f"{dist}/*", "kafka.server.KafkaConfig"],
        check=True,
        timeout=90,
        capture_output=True,
        text=True,
    ).stdout
    names = set(re.findall(r'id="brokerconfigs_([^"]+)"', reference))
    assert len(names) > 300
    defined = {d.name for d in BROKER_CONFIGS}
    unknown = sorted(n for n in names if n not in defined and kafka_only_reason(n) is None)
    assert unknown == []
    BrokerConfig(dict.fromkeys(names - defined, ""))  # accepted, whatever the value


def _wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace")
        if text in content:
            return content
        if proc.poll() is not None:
            raise AssertionError(f"pydmq serve exited with {proc.returncode}:\n{content}")
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} within {timeout} s:\n{log.read_text(errors='replace')}")


@pytest.mark.timeout(90)
def test_serve_starts_from_kafkas_server_properties(tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    config = tmp_path / "server.properties"
    config.write_text(kafka4_server_properties(tmp_path / "logs", port, controller_port))
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "pydmq", "serve", "--config", str(config)),
                *("--http-listener", "http://127.0.0.1:0"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        content = _wait_for(log, "ready in", proc)
        with KafkaClient(f"127.0.0.1:{port}") as client:
            client.refresh_metadata([])
            assert sorted(client.brokers) == [1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    warnings = [line for line in content.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, content
    assert "4 Kafka broker properties have no effect in pydmq and are ignored:" in warnings[0]
    for name in KAFKA4_WITHOUT_EFFECT:
        assert content.count(name) == 1, name


def test_serve_refuses_a_misspelled_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "server.properties"
    config.write_text("num.io.thread=8\n")
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "unknown broker property 'num.io.thread'; did you mean 'num.io.threads'?" in err
