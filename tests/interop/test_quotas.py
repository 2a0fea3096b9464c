"""Client quotas over the wire: Kafka's own kafka-configs tool manages them, and real clients
are held near their byte rates while clients without a quota are never throttled.

- ``kafka-configs`` (Kafka 4.4's ConfigCommand, from compat/kafka/dist, run unchanged) adds,
  describes and deletes client-id, default client-id and ip quotas (AlterClientQuotas /
  DescribeClientQuotas through Java's AdminClient);
- a confluent-kafka producer with ``client.id=slow`` under ``producer_byte_rate=100000`` for
  3 s sees throttle times in its responses (librdkafka's ``throttle`` statistics) and gets
  fewer bytes acknowledged than a loose bound from the quota; a producer with another client
  id is never throttled;
- a consumer under ``consumer_byte_rate`` likewise, against one without a quota.

The bounds only catch a quota not applied at all: ``2 * quota * (seconds + 11)`` plus one
batch (Kafka's rate counts at least 10 whole windows, so a new client may take ~10 s worth of
quota at once, and the first batch of a fetch is returned whole).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from .support import kafka_configs, kafka_configs_unavailable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from pydmq.protocol.messages import alter_client_quotas as aq  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

PAYLOAD = b"q" * 1000


def _set_client_quota(bootstrap: str, client_id: str, key: str, value: float | None) -> None:
    request = aq.AlterClientQuotasRequest(
        entries=[
            aq.EntryData(
                entity=[aq.EntityData(entity_type="client-id", entity_name=client_id)],
                ops=[aq.OpData(key=key, value=value or 0.0, remove=value is None)],
            )
        ]
    )
    with RawClient(bootstrap) as client:
        body = client.request(49, 1, request).body
    assert [e.error_code for e in body.entries] == [0]


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)


def _max_throttle(stats: list[dict[str, Any]]) -> int:
    return max(
        (b.get("throttle", {}).get("max", 0) for s in stats for b in s["brokers"].values()),
        default=0,
    )


def _produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, int]:
    """(payload bytes acknowledged within ``seconds``, the largest throttle librdkafka saw)."""
    stats: list[dict[str, Any]] = []
    acked = [0]
    start = time.monotonic()
    end = start + seconds

    def delivered(err: Any, msg: Any) -> None:
        if err is None and time.monotonic() <= end:
            acked[0] += len(msg.value())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "acks": 1,
            "linger.ms": 5,
            "statistics.interval.ms": 200,
            "stats_cb": lambda s: stats.append(json.loads(s)),
        }
    )
    while time.monotonic() < end:
        try:
            producer.produce(topic, PAYLOAD, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    # What is still queued is not counted; flush only to stop cleanly (bounded).
    producer.purge()
    producer.flush(10)
    producer.poll(0.5)  # a last statistics callback
    return acked[0], _max_throttle(stats)


def _consume_for(
    bootstrap: str, topic: str, client_id: str, seconds: float, stop_at: int
) -> tuple[int, int]:
    """(payload bytes consumed within ``seconds`` or until ``stop_at`` bytes, the largest
    throttle librdkafka saw)."""
    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"quotas-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda s: stats.append(json.loads(s)),
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and got < stop_at:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got += len(msg.value())
        consumer.poll(0.5)
    finally:
        consumer.close()
    return got, _max_throttle(stats)


def _loose_bound(quota: float, seconds: float, batch: int) -> float:
    return 2 * quota * (seconds + 11) + batch


def test_a_producer_over_its_byte_rate_is_throttled_and_others_are_not(broker: Any) -> None:
    topic = f"quota-produce-{uuid.uuid4().hex[:8]}"
    _create_topic(broker.bootstrap, topic)
    quota = 100_000.0
    _set_client_quota(broker.bootstrap, "slow", "producer_byte_rate", quota)
    try:
        seconds = 3.0
        acked, throttle = _produce_for(broker.bootstrap, topic, "slow", seconds)
        fast_acked, fast_throttle = _produce_for(broker.bootstrap, topic, "fast", 1.0)
    finally:
        _set_client_quota(broker.bootstrap, "slow", "producer_byte_rate", None)
    print(
        f"\nslow (producer_byte_rate={quota:.0f}): {acked} B acked in {seconds} s, "
        f"max throttle {throttle} ms; fast (no quota): {fast_acked} B in 1 s, "
        f"max throttle {fast_throttle} ms"
    )
    assert throttle > 0
    assert 0 < acked <= _loose_bound(quota, seconds, 1_000_000)
    assert fast_throttle == 0
    assert fast_acked > 0


def test_a_consumer_over_its_byte_rate_is_throttled_and_others_are_not(broker: Any) -> None:
    topic = f"quota-fetch-{uuid.uuid4().hex[:8]}"
    _create_topic(broker.bootstrap, topic)
    total = 6_000
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(total):
        producer.produce(topic, PAYLOAD)
        producer.poll(0)
    assert producer.flush(30) == 0
    quota = 100_000.0
    _set_client_quota(broker.bootstrap, "slowc", "consumer_byte_rate", quota)
    try:
        seconds = 3.0
        got, throttle = _consume_for(broker.bootstrap, topic, "slowc", seconds, total * 1000)
        fast_got, fast_throttle = _consume_for(broker.bootstrap, topic, "fastc", 30.0, total * 1000)
    finally:
        _set_client_quota(broker.bootstrap, "slowc", "consumer_byte_rate", None)
    print(
        f"\nslowc (consumer_byte_rate={quota:.0f}): {got} B in {seconds} s, max throttle "
        f"{throttle} ms; fastc (no quota): {fast_got} B, max throttle {fast_throttle} ms"
    )
    assert throttle > 0
    assert 0 < got <= _loose_bound(quota, seconds, 1_048_576)
    assert fast_throttle == 0
    assert fast_got == total * 1000


def _kafka_configs(bootstrap: str, *args: str) -> str:
    out = kafka_configs(bootstrap, *args)
    return "\n".join(
        line for line in out.splitlines() if line.startswith(("Quota configs", "Completed"))
    )


def _quota_line(line: str) -> tuple[str, set[str]]:
    """``Quota configs for <entity> are k=v, k=v`` -> (entity, {k=v}): the tool prints the
    values in the order of the answer, which is a hash order in Kafka."""
    entity, _, values = line.removeprefix("Quota configs for ").partition(" are ")
    return entity, set(values.split(", "))


def test_kafka_configs_manages_client_quotas_unchanged(broker: Any) -> None:
    missing = kafka_configs_unavailable()
    if missing:
        pytest.skip(missing)
    boot = broker.bootstrap
    name = f"tool-{uuid.uuid4().hex[:6]}"
    added = _kafka_configs(
        boot,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        name,
        "--add-config",
        "producer_byte_rate=1048576,consumer_byte_rate=2097152,request_percentage=50.5",
    )
    assert f"Completed updating config for client {name}." in added
    described = _kafka_configs(
        boot, "--describe", "--entity-type", "clients", "--entity-name", name
    )
    assert _quota_line(described) == (
        f"client-id '{name}'",
        {"consumer_byte_rate=2097152.0", "producer_byte_rate=1048576.0", "request_percentage=50.5"},
    )
    _kafka_configs(
        boot, "--alter", "--entity-type", "clients", "--entity-name", name,
        "--delete-config", "request_percentage",
    )  # fmt: skip
    described = _kafka_configs(
        boot, "--describe", "--entity-type", "clients", "--entity-name", name
    )
    assert _quota_line(described) == (
        f"client-id '{name}'",
        {"consumer_byte_rate=2097152.0", "producer_byte_rate=1048576.0"},
    )
    _kafka_configs(
        boot, "--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3",
        "--add-config", "connection_creation_rate=20",
    )  # fmt: skip
    described = _kafka_configs(
        boot, "--describe", "--entity-type", "ips", "--entity-name", "10.1.2.3"
    )
    assert described == "Quota configs for ip '10.1.2.3' are connection_creation_rate=20.0"
    _kafka_configs(
        boot, "--alter", "--entity-type", "clients", "--entity-name", name,
        "--delete-config", "producer_byte_rate,consumer_byte_rate",
    )  # fmt: skip
    _kafka_configs(
        boot, "--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3",
        "--delete-config", "connection_creation_rate",
    )  # fmt: skip
    assert (
        _kafka_configs(boot, "--describe", "--entity-type", "clients", "--entity-name", name) == ""
    )


def test_request_percentage_throttles_every_api_but_the_exempt_ones(broker: Any) -> None:
    from pydmq.protocol.messages.api_versions import ApiVersionsRequest
    from pydmq.protocol.messages.metadata import MetadataRequest

    # A quota no request can stay under: the throttle is Kafka's bound, one window (1 s).
    _set_client_quota(broker.bootstrap, "busy", "request_percentage", 1e-9)
    try:
        with RawClient(broker.bootstrap) as client:
            metadata = client.request(3, 12, MetadataRequest(topics=[]), client_id="busy").body
        with RawClient(broker.bootstrap) as client:
            versions = client.request(18, 3, ApiVersionsRequest(), client_id="busy").body
        with RawClient(broker.bootstrap) as client:
            other = client.request(3, 12, MetadataRequest(topics=[]), client_id="idle").body
    finally:
        _set_client_quota(broker.bootstrap, "busy", "request_percentage", None)
    assert metadata.throttle_time == 1000
    assert versions.throttle_time == 0
    assert other.throttle_time == 0


def test_pydmq_quotas_cli_alters_and_describes_as_kafka_configs_prints(
    broker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydmq.cli import main

    boot = broker.bootstrap
    assert main(["quotas", "alter", "-b", boot, "--client", "cli-slow",
                 "--add-config", "producer_byte_rate=100000,request_percentage=12.5"]) == 0  # fmt: skip
    assert main(["quotas", "alter", "-b", boot, "--user", "alice", "--client-default",
                 "--add-config", "consumer_byte_rate=2000000"]) == 0  # fmt: skip
    assert main(["quotas", "alter", "-b", boot, "--ip-default",
                 "--add-config", "connection_creation_rate=3e9"]) == 1  # fmt: skip
    capsys.readouterr()
    assert main(["quotas", "describe", "-b", boot, "--client", "cli-slow"]) == 0
    assert main(["quotas", "describe", "-b", boot, "--user", "alice"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Quota configs for client-id 'cli-slow' are producer_byte_rate=100000.0, "
        "request_percentage=12.5",
        "Quota configs for user-principal 'alice', the default client-id are "
        "consumer_byte_rate=2000000.0",
    ]
    assert main(["quotas", "alter", "-b", boot, "--client", "cli-slow",
                 "--delete-config", "producer_byte_rate,request_percentage"]) == 0  # fmt: skip
    assert main(["quotas", "alter", "-b", boot, "--user", "alice", "--client-default",
                 "--delete-config", "consumer_byte_rate"]) == 0  # fmt: skip


def test_controller_mutation_rate_refuses_strict_requests_and_throttles_old_ones(
    broker: Any,
) -> None:
    from pydmq.protocol.messages import create_topics as ct
    from pydmq.protocol.messages import delete_topics as dt

    def create(client_id: str, version: int, names: list[str]) -> Any:
        request = ct.CreateTopicsRequest(
            topics=[
                ct.CreatableTopic(name=n, num_partitions=10, replication_factor=1) for n in names
            ],
            timeout=30_000,
        )
        with RawClient(broker.bootstrap) as client:  # a new connection: the last one is muted
            return client.request(19, version, request, client_id=client_id).body

    prefix = f"mutation-{uuid.uuid4().hex[:6]}"
    strict = [f"{prefix}-s{i}" for i in range(3)]
    old = [f"{prefix}-o{i}" for i in range(3)]
    # 1 partition/s: a bucket of 11 partitions (11 windows of 1 s)
    _set_client_quota(broker.bootstrap, "mutator", "controller_mutation_rate", 1.0)
    _set_client_quota(broker.bootstrap, "mutator-old", "controller_mutation_rate", 1.0)
    try:
        created = create("mutator", 7, strict)
        permissive = create("mutator-old", 5, old)
        request = dt.DeleteTopicsRequest(
            topics=[dt.DeleteTopicState(name=n) for n in strict[:2]], timeout=30_000
        )
        with RawClient(broker.bootstrap) as client:
            deleted = client.request(20, 6, request, client_id="mutator").body
    finally:
        _set_client_quota(broker.bootstrap, "mutator", "controller_mutation_rate", None)
        _set_client_quota(broker.bootstrap, "mutator-old", "controller_mutation_rate", None)
    print(
        f"\nstrict: {[t.error_code for t in created.topics]}, throttle {created.throttle_time} ms;"
        f" permissive: {[t.error_code for t in permissive.topics]}, "
        f"throttle {permissive.throttle_time} ms"
    )
    # 11 -> 1 -> -9 tokens: the third topic meets an empty bucket
    assert [t.error_code for t in created.topics] == [0, 0, 89]
    assert created.topics[2].error_message is None
    assert 8000 <= created.throttle_time <= 9000
    assert [t.error_code for t in permissive.topics] == [0, 0, 0]
    assert permissive.throttle_time > 0
    assert [r.error_code for r in deleted.responses] == [89, 89]
    assert deleted.throttle_time > 0


def _produce_request(topic: str, value_size: int) -> Any:
    from pydmq.protocol.messages import produce as pr
    from pydmq.protocol.records import SimpleRecord, build_batch

    batch = build_batch([SimpleRecord(None, b"v" * value_size, timestamp=0)])
    return pr.ProduceRequest(
        acks=1,
        timeout=10_000,
        topic_data=[
            pr.TopicProduceData(
                name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )


@pytest.mark.parametrize(("version", "muted"), [(9, True), (5, False)])
def test_a_throttled_client_is_muted_or_its_answer_delayed(
    broker: Any, version: int, muted: bool
) -> None:
    """From Produce v6 (KIP-219) the answer leaves at once and the connection's next request
    waits out the throttle; before it, the answer itself is delayed. Only lower bounds are
    asserted: the broker's timer cannot fire early."""
    topic = f"quota-mute-{uuid.uuid4().hex[:8]}"
    _create_topic(broker.bootstrap, topic)
    client_id = f"muted-{version}"
    # ~10.3 KB at a new client counts 10 s: ~1030 B/s against 1000 B/s, a ~300 ms throttle
    _set_client_quota(broker.bootstrap, client_id, "producer_byte_rate", 1000.0)
    request = _produce_request(topic, 10_200)
    try:
        with RawClient(broker.bootstrap) as client:
            sent = time.monotonic()
            first = client.request(0, version, request, client_id=client_id).body
            answered = time.monotonic()
            second = client.request(3, 12, None, client_id="after-the-throttle")
            done = time.monotonic()
    finally:
        _set_client_quota(broker.bootstrap, client_id, "producer_byte_rate", None)
    throttle = first.throttle_time / 1000.0
    print(
        f"\nProduce v{version}: throttle {first.throttle_time} ms, answer after "
        f"{answered - sent:.3f} s, next answer {done - answered:.3f} s later"
    )
    assert 0.1 < throttle < 2.0
    assert second.body is not None
    if muted:
        assert done - answered >= throttle - 0.05
    else:
        assert answered - sent >= throttle - 0.05
