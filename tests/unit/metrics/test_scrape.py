"""/metrics and the health endpoints of an embedded node, checked against what real clients
(confluent-kafka) did; every scrape parsed with prometheus_client's own parser."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pydmq.testing.embedded import EmbeddedBroker

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=")
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def get_json(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    for i in range(count):
        producer.produce(topic, value=b"v" * 50, key=str(i).encode())
    assert producer.flush(30) == 0


def test_messages_bytes_and_lag_match_what_clients_did(tmp_path: Path) -> None:
    topic, produced, committed = "orders", 137, 100
    with EmbeddedBroker(tmp_path / "data", overrides={"num.partitions": 1}) as broker:
        port = broker.http_port
        assert port > 0
        produce(broker.bootstrap, topic, 10)  # creates the topic
        before = scrape(port)
        produce(broker.bootstrap, topic, produced)
        after = scrape(port)
        name = "pydmq_broker_messages_in_total"
        assert value(after, name, topic=topic) - value(before, name, topic=topic) == produced
        assert value(after, "pydmq_broker_bytes_in_total", topic=topic) > value(
            before, "pydmq_broker_bytes_in_total", topic=topic
        )
        assert value(after, "pydmq_log_end_offset", topic=topic, partition="0") == 10 + produced

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "billing",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe([topic])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 10 + produced and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    seen += 1
            assert seen == 10 + produced
            consumer.commit(
                offsets=[confluent_kafka.TopicPartition(topic, 0, committed)], asynchronous=False
            )
            consumed = scrape(port)
        finally:
            consumer.close()
        assert value(consumed, "pydmq_broker_bytes_out_total", topic=topic) > value(
            after, "pydmq_broker_bytes_out_total", topic=topic
        )
        lag = value(
            consumed, "pydmq_consumer_group_lag", group="billing", topic=topic, partition="0"
        )
        assert lag == 10 + produced - committed
        # requests per API, with Kafka's split of their time
        assert value(consumed, "pydmq_requests_total", api="Produce") >= 2
        assert value(consumed, "pydmq_request_duration_seconds_count", api="Produce") >= 2
        for phase in ("queue", "local", "remote"):
            assert (
                value(
                    consumed, "pydmq_request_phase_duration_seconds_count", api="Fetch", phase=phase
                )
                >= 1
            )
        assert value(consumed, "pydmq_controller_active") == 1
        assert value(consumed, "pydmq_replica_under_replicated_partitions") == 0
        assert value(consumed, "pydmq_log_size_bytes", topic=topic, partition="0") > 0


def test_each_node_has_its_own_registry(tmp_path: Path) -> None:
    with (
        EmbeddedBroker(tmp_path / "a") as first,
        EmbeddedBroker(tmp_path / "b") as second,
    ):
        assert first.http_port != second.http_port
        produce(first.bootstrap, "only-on-a", 5)
        on_first, on_second = scrape(first.http_port), scrape(second.http_port)
        assert value(on_first, "pydmq_broker_messages_in_total", topic="only-on-a") == 5
        assert ("pydmq_broker_messages_in_total", (("topic", "only-on-a"),)) not in on_second


def test_health_of_a_single_node(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data") as broker:
        status, live = get_json(broker.http_port, "/v1/health/live")
        assert status == 200 and live["status"] == "live"
        status, ready = get_json(broker.http_port, "/v1/health/ready")
        assert status == 200 and ready["status"] == "ready", ready
        status, missing = get_json(broker.http_port, "/v1/health/nothing")
        assert status == 404 and missing["error"]["code"] == "NOT_FOUND"  # type: ignore[index]


def test_http_listener_off(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data", overrides={"pydmq.http.listeners": ""}) as broker:
        assert broker.http_port == 0
