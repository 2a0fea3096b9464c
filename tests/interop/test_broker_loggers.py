"""Run-time log levels through Kafka's own tool: ``kafka-configs --entity-type broker-loggers``
(Kafka 4.4's ConfigCommand from compat/kafka/dist, unchanged) describes a pydmq broker's
loggers, raises one to WARN (its INFO lines stop: a group's rebalance is no longer logged) and
deletes the level again (they come back). The error codes of every refusal are compared with
Kafka's in test_differential.py's ``broker_loggers`` scenario."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from .conftest import BrokerProcess
from .support import kafka_configs, kafka_configs_unavailable

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

GROUP_LOGGER = "pydmq.groups.classic.manager"


def _loggers(bootstrap: str, *args: str) -> str:
    return kafka_configs(bootstrap, "--entity-type", "broker-loggers", "--entity-name", "1", *args)


def _levels(bootstrap: str) -> dict[str, str]:
    """The tool's describe output: ``  <logger>=<LEVEL> sensitive=false synonyms={}`` lines."""
    out = _loggers(bootstrap, "--describe")
    levels = {}
    for line in out.splitlines():
        name, sep, rest = line.strip().partition("=")
        if sep and " sensitive=" in rest:
            levels[name] = rest.split(" ", 1)[0]
    return levels


def _join(bootstrap: str, group: str, topic: str) -> None:
    """One consumer joins ``group`` until it has its assignment, then leaves."""
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"{group}: no assignment within 60 s"
            consumer.poll(0.2)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    missing = kafka_configs_unavailable()
    if missing:
        pytest.skip(missing)
    b = BrokerProcess(tmp_path_factory.mktemp("loggers") / "data")
    b.start()
    yield b
    b.stop()


def test_kafka_configs_changes_a_logger_level_at_run_time(broker: BrokerProcess) -> None:
    log = Path(broker.log_path)
    levels = _levels(broker.bootstrap)
    assert levels["root"] == "INFO", levels
    assert levels[GROUP_LOGGER] == "INFO", levels
    topic = f"loggers-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)

    _loggers(broker.bootstrap, "--alter", "--add-config", f"{GROUP_LOGGER}=WARN")
    assert _levels(broker.bootstrap)[GROUP_LOGGER] == "WARN"
    quiet = f"{topic}-quiet"
    _join(broker.bootstrap, quiet, topic)

    _loggers(broker.bootstrap, "--alter", "--delete-config", GROUP_LOGGER)
    assert _levels(broker.bootstrap)[GROUP_LOGGER] == "INFO"  # root's again
    loud = f"{topic}-loud"
    _join(broker.bootstrap, loud, topic)

    text = log.read_text(errors="replace")
    assert f"group {loud}" in text, text[-3000:]
    assert f"group {quiet}" not in text, "the group logger wrote INFO lines while at WARN"


class JsonLogBroker(BrokerProcess):
    def command(self) -> list[str]:
        return [*super().command(), "--log-format", "json"]


def test_json_log_lines(tmp_path: Path) -> None:
    """``pydmq serve --log-format json``: every line of the log is one JSON object, with
    Kafka's level names, including the lines of a client's session."""
    b = JsonLogBroker(tmp_path / "data")
    b.start()
    try:
        topic = f"json-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[
            topic
        ].result(30)
        _join(b.bootstrap, f"{topic}-group", topic)
    finally:
        b.stop()
    lines = Path(b.log_path).read_text().splitlines()
    assert len(lines) > 5, lines
    records = [json.loads(line) for line in lines]
    assert all(set(r) >= {"ts", "level", "logger", "thread", "message"} for r in records)
    assert {r["level"] for r in records} <= {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
    assert any(f"group {topic}-group" in r["message"] for r in records), records[-5:]
