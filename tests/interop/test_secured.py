"""A broker secured the way a Kafka user secures one: SASL_SSL (TLS, then SCRAM or PLAIN),
the StandardAuthorizer with a super user, and ACLs granting one user one topic prefix.

confluent-kafka (librdkafka) talks to it. Checks: TLS and SASL together authenticate (the
principal the ACLs see is the SASL user's), an ACL created by the super user lets ``alice``
produce and consume her prefix and nothing else, a wrong password and a plaintext client are
refused.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pydmq.testing.tls import TestCA
from support.sasl_broker import PASSWORDS, PLAIN_JAAS, SaslListenerBroker

from .conftest import DEFAULT_OVERRIDES
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]


@dataclass
class Secured:
    bootstrap: str
    ca: Path


@pytest.fixture(scope="module")
def secured() -> Iterator[Secured]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-secured-"))
    ca = TestCA(root / "certs")
    server = ca.issue("server")
    broker = SaslListenerBroker(
        root / "data",
        "SASL_SSL",
        overrides={
            **DEFAULT_OVERRIDES,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.pem),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        log_path=root / "broker.log",
    )
    broker.start()
    try:
        yield Secured(broker.bootstrap, ca.pem)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def client_config(
    secured: Secured, user: str, mechanism: str, password: str | None = None
) -> dict[str, object]:
    return {
        "bootstrap.servers": secured.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secured.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
    }


def produce(config: dict[str, object], topic: str, count: int) -> list[object]:
    """Produce ``count`` records; the delivery errors (None for each success)."""
    from confluent_kafka import Producer

    outcomes: list[object] = []
    producer = Producer({**config, "message.timeout.ms": 20000})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, _m: outcomes.append(err))
    producer.flush(30)
    return outcomes


def test_acls_decide_by_the_sasl_user_over_tls(secured: Secured) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(client_config(secured, "admin", "SCRAM-SHA-512"))
    mine, other = unique_topic("alice-orders"), unique_topic("payroll")
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in (mine, other)]).values():
        future.result(30)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.WRITE, AclOperation.READ)
    ] + [
        AclBinding(
            ResourceType.GROUP,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
    ]
    for future in admin.create_acls(bindings).values():
        future.result(30)

    alice = client_config(secured, "alice", "PLAIN")
    assert produce(alice, mine, 5) == [None] * 5
    denied = produce(alice, other, 1)
    assert len(denied) == 1 and denied[0] is not None
    assert denied[0].name() == "TOPIC_AUTHORIZATION_FAILED", denied[0]

    consumer = Consumer({**alice, "group.id": "alice-readers", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([mine])
        values: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 5:
                break
        assert values == [f"v{i}".encode() for i in range(5)]
    finally:
        consumer.close()


def test_a_wrong_password_is_refused(secured: Secured) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    config = client_config(secured, "alice", "PLAIN", password="guess")
    producer = Producer({**config, "error_cb": errors.append})
    for _ in range(40):  # error callbacks are served by poll()
        producer.poll(0.25)
        if errors:
            break
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_a_plaintext_client_gets_nothing(secured: Secured) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": secured.bootstrap, "socket.timeout.ms": 3000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
