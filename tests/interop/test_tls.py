"""Real clients over TLS against a pydmq broker process: kafka-python, confluent-kafka
(librdkafka), aiokafka and kcat produce and consume over an SSL listener, and over an SSL
listener with ssl.client.auth=required (set by Kafka's per-listener override), where a client
without a certificate is refused; the Java client does so over mTLS. Certificates come from
a throwaway CA made for the run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import ssl
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pydmq.testing.process import free_port
from pydmq.testing.tls import PASSWORD, Identity, TestCA

from .conftest import BrokerProcess
from .support import java_ready, key, run_cmd, run_java, unique_topic, value

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

COUNT = 200


@dataclass(frozen=True)
class TlsBroker:
    """The broker's two TLS listeners and the files a client needs."""

    ssl: str  # SSL, no client authentication
    mtls: str  # SSL, ssl.client.auth=required
    ca: TestCA
    client: Identity


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[TlsBroker]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-tls-"))
    ca = TestCA(root / "certs")
    server, client = ca.issue("server"), ca.issue("client")
    ssl_port, mtls_port = free_port(), free_port()
    broker = BrokerProcess(
        root / "data",
        {
            "listeners": f"SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
            "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(server.p12),
            "ssl.keystore.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem),
            "listener.name.mtls.ssl.client.auth": "required",
        },
    )
    broker.port = ssl_port
    broker.start()
    try:
        yield TlsBroker(f"127.0.0.1:{ssl_port}", f"127.0.0.1:{mtls_port}", ca, client)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def expected(topic_count: int = COUNT) -> list[tuple[bytes, bytes]]:
    return [(key(i), value(i)) for i in range(topic_count)]


# -- confluent-kafka (librdkafka) ----------------------------------------------------------


def confluent_config(tls: TlsBroker, bootstrap: str, with_certificate: bool) -> dict[str, object]:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca.pem),
        "ssl.endpoint.identification.algorithm": "https",
    }
    if with_certificate:
        config |= {
            "ssl.certificate.location": str(tls.client.cert_pem),
            "ssl.key.location": str(tls.client.key_pem),
        }
    return config


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_confluent_kafka(tls_broker: TlsBroker, listener: str) -> None:
    from confluent_kafka import Consumer, Producer

    config = confluent_config(tls_broker, getattr(tls_broker, listener), True)
    topic = unique_topic("tls-confluent")
    producer = Producer({**config, "acks": "all", "enable.idempotence": True})
    for i in range(COUNT):
        producer.produce(topic, value(i), key(i), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {**config, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append((message.key(), message.value()))
    consumer.close()
    assert got == expected()


def test_mtls_refuses_a_client_without_a_certificate(tls_broker: TlsBroker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    anonymous = AdminClient(confluent_config(tls_broker, tls_broker.mtls, False))
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=5)
    named = AdminClient(confluent_config(tls_broker, tls_broker.mtls, True))
    assert named.list_topics(timeout=10).brokers


# -- kafka-python ------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_kafka_python(tls_broker: TlsBroker, listener: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    options = {
        "bootstrap_servers": getattr(tls_broker, listener),
        "security_protocol": "SSL",
        "ssl_cafile": str(tls_broker.ca.pem),
        "ssl_certfile": str(tls_broker.client.cert_pem),
        "ssl_keyfile": str(tls_broker.client.key_pem),
    }
    topic = unique_topic("tls-kafka-python")
    producer = KafkaProducer(acks="all", **options)
    for i in range(COUNT):
        producer.send(topic, value(i), key(i), partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10_000, **options)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for message in consumer:
        got.append((message.key, message.value))
        if len(got) == COUNT:
            break
    consumer.close()
    assert got == expected()


# -- aiokafka ----------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_aiokafka(tls_broker: TlsBroker, listener: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    context = ssl.create_default_context(cafile=str(tls_broker.ca.pem))
    context.load_cert_chain(str(tls_broker.client.cert_pem), str(tls_broker.client.key_pem))
    bootstrap = getattr(tls_broker, listener)
    topic = unique_topic("tls-aiokafka")

    async def run() -> list[tuple[bytes, bytes]]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context, acks="all"
        )
        await producer.start()
        try:
            for i in range(COUNT):
                await producer.send(topic, value(i), key(i), partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_context=context,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        got: list[tuple[bytes, bytes]] = []
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning(TopicPartition(topic, 0))
            while len(got) < COUNT:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                for records in batches.values():
                    got.extend((r.key, r.value) for r in records)  # type: ignore[misc]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == expected()


# -- kcat --------------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_kcat(tls_broker: TlsBroker, listener: str) -> None:
    if shutil.which("kcat") is None:
        pytest.fail("kcat not on PATH: run ./scripts/test (installs Debian's kcat)")
    bootstrap = getattr(tls_broker, listener)
    options = [
        "-b",
        bootstrap,
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={tls_broker.ca.pem}",
        "-X",
        f"ssl.certificate.location={tls_broker.client.cert_pem}",
        "-X",
        f"ssl.key.location={tls_broker.client.key_pem}",
    ]
    topic = unique_topic("tls-kcat")
    lines = b"".join(key(i) + b":" + value(i) + b"\n" for i in range(COUNT))
    run_cmd(["kcat", "-P", *options, "-t", topic, "-p", "0", "-K:"], input=lines, timeout=60)
    out = run_cmd(
        ["kcat", "-C", *options, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%k:%s\\n"],
        timeout=60,
    ).stdout
    assert out.splitlines() == [key(i) + b":" + value(i) for i in range(COUNT)]


# -- Java kafka-clients ------------------------------------------------------------------------


def test_java_client_over_mtls(tls_broker: TlsBroker) -> None:
    """The Java producer and consumer with a PKCS12 key store and a PEM trust store, and
    host-name verification (Kafka's default ssl.endpoint.identification.algorithm=https)."""
    reason = java_ready()
    if reason:
        pytest.fail(f"Java interop client unavailable: {reason}")
    props = [
        "security.protocol=SSL",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={tls_broker.client.p12}",
        f"ssl.keystore.password={PASSWORD}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={tls_broker.ca.pem}",
    ]
    options = [arg for prop in props for arg in ("--prop", prop)]
    topic = unique_topic("tls-java")
    common = ["--bootstrap", tls_broker.mtls, "--topic", topic, *options]
    run_java(["create-topic", *common, "--partitions", "1"], timeout=90)
    run_java(["produce", *common, "--count", str(COUNT), "--acks", "all"], timeout=90)
    out = run_java(["consume", *common, "--count", str(COUNT)], timeout=90).stdout
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [base64.b64decode(r["k"]) for r in records] == [key(i) for i in range(COUNT)]
    assert [base64.b64decode(r["v"]) for r in records] == [value(i) for i in range(COUNT)]
