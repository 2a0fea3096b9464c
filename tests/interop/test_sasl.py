"""SASL over SASL_PLAINTEXT: real clients authenticate with PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER (Kafka's unsecured tokens), produce and consume; the protocol rules are checked
on raw frames (what is served before authentication, the answers to a wrong password and an
unknown mechanism, the connection closing after a failure, KIP-368's session lifetime).

One broker process for the module; SCRAM users are created through AlterUserScramCredentials
by confluent-kafka's admin client authenticated with PLAIN.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest
from pydmq.security.sasl.client import sasl_client
from support.raw_client import RawClient

from .sasl_support import SaslBrokerProcess
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SCRAM_USER, SCRAM_PASSWORD = "bob", "bob-secret"
HANDSHAKE, AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[SaslBrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-sasl-"))
    broker = SaslBrokerProcess(root / "data", {"connections.max.reauth.ms": "600000"})
    broker.start()
    try:
        _create_scram_user(broker.bootstrap)
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def _confluent(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def _create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(_confluent(bootstrap, "PLAIN", "admin", "admin-secret"))
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                SCRAM_USER, ScramCredentialInfo(mechanism, 8192), SCRAM_PASSWORD.encode()
            )
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
    )
    for future in futures.values():
        future.result(timeout=30)


# -- real clients -----------------------------------------------------------------------------


def test_confluent_admin_describes_the_scram_user(sasl_broker: SaslBrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_confluent(sasl_broker.bootstrap, "PLAIN", "admin", "admin-secret"))
    described = admin.describe_user_scram_credentials([SCRAM_USER])[SCRAM_USER].result(30)
    assert sorted((i.mechanism.value, i.iterations) for i in described.scram_credential_infos) == [
        (1, 8192),
        (2, 8192),
    ]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
        ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
    ],
)
def test_confluent_kafka_produces_and_consumes(
    sasl_broker: SaslBrokerProcess, mechanism: str, user: str, password: str
) -> None:
    from confluent_kafka import Consumer, Producer

    conf = _confluent(sasl_broker.bootstrap, mechanism, user, password)
    topic = unique_topic("sasl-ck")
    producer = Producer(conf)
    for i in range(10):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))


def test_confluent_kafka_wrong_password_is_an_authentication_error(
    sasl_broker: SaslBrokerProcess,
) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    conf = _confluent(sasl_broker.bootstrap, "SCRAM-SHA-256", SCRAM_USER, "wrong")
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        producer.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "due to invalid credentials with SASL mechanism SCRAM-SHA-256" in errors[0].str()


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)],
)
def test_kafka_python_produces_and_consumes(
    sasl_broker: SaslBrokerProcess, mechanism: str, user: str, password: str
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = {
        "bootstrap_servers": sasl_broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    topic = unique_topic("sasl-kp")
    producer = KafkaProducer(**conf)
    for i in range(5):
        producer.send(topic, f"v{i}".encode()).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    got = []
    for message in consumer:  # stops at 5 records, or after 10 s without one
        got.append(message.value)
        if len(got) == 5:
            break
    consumer.close()
    assert sorted(got) == [f"v{i}".encode() for i in range(5)]


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)],
)
def test_aiokafka_produces_and_consumes(
    sasl_broker: SaslBrokerProcess, mechanism: str, user: str, password: str
) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    conf = {
        "bootstrap_servers": sasl_broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    topic = unique_topic("sasl-aio")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **conf)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < 5:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got.extend(m.value for msgs in batch.values() for m in msgs)
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == [f"v{i}".encode() for i in range(5)]


def _unsecured_token(subject: str, lifetime_s: int = 3600) -> str:
    def part(value: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'exp': time.time() + lifetime_s})}."


def test_confluent_kafka_oauthbearer_with_an_unsecured_token(
    sasl_broker: SaslBrokerProcess,
) -> None:
    from confluent_kafka import Producer

    token = _unsecured_token("carol")

    def refresh(_config: str) -> tuple[str, float, str, dict[str, str]]:
        return token, time.time() + 3600, "carol", {}

    producer = Producer(
        {
            "bootstrap.servers": sasl_broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": refresh,
        }
    )
    producer.produce(unique_topic("sasl-oauth"), b"x")
    assert producer.flush(30) == 0


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)],
)
def test_kcat_produces_and_consumes(
    sasl_broker: SaslBrokerProcess, mechanism: str, user: str, password: str
) -> None:
    if shutil.which("kcat") is None:
        pytest.fail("kcat not on PATH: run ./scripts/test (installs Debian's kcat)")
    topic = unique_topic("sasl-kcat")
    base = [
        "kcat",
        "-b",
        sasl_broker.bootstrap,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        f"sasl.mechanisms={mechanism}",
        "-X",
        f"sasl.username={user}",
        "-X",
        f"sasl.password={password}",
        "-t",
        topic,
    ]
    subprocess.run([*base, "-P"], input=b"a\nb\nc\n", check=True, timeout=60)
    out = subprocess.run(
        [*base, "-C", "-o", "beginning", "-e", "-c", "3"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert sorted(out.stdout.split()) == [b"a", b"b", b"c"]


# -- the protocol, on raw frames --------------------------------------------------------------


def _authenticate(client: RawClient, mechanism: str, user: str, password: str) -> list[object]:
    handshake = client.request(HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism)).body
    assert handshake.error_code == ErrorCode.NONE
    sasl = sasl_client(mechanism, user, password)
    message: bytes | None = sasl.first_message()
    answers: list[object] = []
    while message is not None:
        answer = client.request(AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=message)).body
        answers.append(answer)
        if answer.error_code != ErrorCode.NONE:
            return answers
        message = sasl.evaluate_challenge(answer.auth_bytes)
    return answers


def test_before_authentication_only_api_versions_and_handshake(
    sasl_broker: SaslBrokerProcess,
) -> None:
    with RawClient(sasl_broker.bootstrap) as client:
        versions = client.request(API_VERSIONS, 2).body
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[HANDSHAKE] == (0, 1) and keys[AUTHENTICATE] == (0, 2)
        client.send_request_no_response(METADATA, 12, MetadataRequest(topics=None))
        assert client.wait_closed()


def test_unknown_mechanism_lists_the_enabled_ones_then_closes(
    sasl_broker: SaslBrokerProcess,
) -> None:
    with RawClient(sasl_broker.bootstrap) as client:
        answer = client.request(HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI")).body
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
        assert client.wait_closed()


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "wrong"),
        ("PLAIN", "nobody", "alice-secret"),
        ("SCRAM-SHA-256", SCRAM_USER, "wrong"),
        ("SCRAM-SHA-512", "nobody", SCRAM_PASSWORD),
    ],
)
def test_bad_credentials_fail_with_a_message_then_close(
    sasl_broker: SaslBrokerProcess, mechanism: str, user: str, password: str
) -> None:
    with RawClient(sasl_broker.bootstrap) as client:
        answer = _authenticate(client, mechanism, user, password)[-1]
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
        assert "Authentication failed" in answer.error_message  # type: ignore[attr-defined]
        assert "nobody" not in answer.error_message  # type: ignore[attr-defined]
        assert client.wait_closed()


def test_authenticated_session_lifetime_and_requests(sasl_broker: SaslBrokerProcess) -> None:
    with RawClient(sasl_broker.bootstrap) as client:
        final = _authenticate(client, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)[-1]
        assert final.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        assert final.session_lifetime == 600000  # type: ignore[attr-defined]
        assert client.request(METADATA, 12).body.brokers
        # Re-authentication (KIP-368) on the same connection keeps it working.
        again = _authenticate(client, "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD)[-1]
        assert again.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        assert client.request(METADATA, 12).body.brokers


def test_handshake_v0_then_bare_tokens(sasl_broker: SaslBrokerProcess) -> None:
    """Pre-KIP-152 clients: after SaslHandshake v0 the tokens travel as bare frames."""
    with RawClient(sasl_broker.bootstrap) as client:
        answer = client.request(HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN")).body
        assert answer.error_code == ErrorCode.NONE
        client.send(
            len(b"\x00alice\x00alice-secret").to_bytes(4, "big") + b"\x00alice\x00alice-secret"
        )
        assert client.read_frame() == b""
        assert client.request(METADATA, 12, MetadataRequest(topics=None)).body.brokers
    with RawClient(sasl_broker.bootstrap) as client:
        client.request(HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
        client.send(len(b"\x00alice\x00nope").to_bytes(4, "big") + b"\x00alice\x00nope")
        assert client.wait_closed()


def test_stalled_and_malformed_exchanges_do_not_disturb_others(
    sasl_broker: SaslBrokerProcess,
) -> None:
    """A client that stops in the middle of a SCRAM exchange and one that sends a malformed
    SaslAuthenticate frame: the first stays open, the second is closed, and another client
    authenticates and is served meanwhile."""
    with RawClient(sasl_broker.bootstrap) as stalled, RawClient(sasl_broker.bootstrap) as bad:
        stalled.request(HANDSHAKE, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
        first = sasl_client("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD).first_message()
        stalled.request(AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=first))
        bad.request(HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        # SaslAuthenticate v2 whose compact bytes length runs past the frame.
        header = b"\x00\x24\x00\x02\x00\x00\x00\x07\x00\x03raw\x00"
        body = b"\x7f\x00"
        bad.send(len(header + body).to_bytes(4, "big") + header + body)
        assert bad.wait_closed()
        with RawClient(sasl_broker.bootstrap) as other:
            final = _authenticate(other, "PLAIN", "alice", "alice-secret")[-1]
            assert final.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
            assert other.request(METADATA, 12, MetadataRequest(topics=None)).body.brokers
        assert stalled.is_open()


def test_large_frames_before_authentication_close_the_connection(
    sasl_broker: SaslBrokerProcess,
) -> None:
    """sasl.server.max.receive.size (512 KiB): an unauthenticated client may not make the
    broker buffer a large frame; once authenticated, socket.request.max.bytes applies."""
    with RawClient(sasl_broker.bootstrap) as client:
        client.send((600 * 1024).to_bytes(4, "big") + b"\x00" * 1024)
        assert client.wait_closed()
    with RawClient(sasl_broker.bootstrap) as client:
        final = _authenticate(client, "PLAIN", "alice", "alice-secret")[-1]
        assert final.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        client.send((600 * 1024).to_bytes(4, "big") + b"\x00" * 1024)
        assert client.is_open()
