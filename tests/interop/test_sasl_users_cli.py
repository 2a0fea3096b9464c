"""SCRAM users seeded at the first start (``pydmq serve --add-scram``, Kafka's
``kafka-storage.sh format --add-scram``) and managed with ``pydmq users`` authenticated
through ``--command-config`` (Kafka's tools' client properties); a real client logs in with
the users the command line made, and no longer once deleted; the seed survives a restart,
and a later start does not seed again (a deleted user stays deleted)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .sasl_support import SaslBrokerProcess
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[SaslBrokerProcess, Path]]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-sasl-cli-"))
    process = SaslBrokerProcess(
        root / "data",
        extra_args=("--add-scram", 'SCRAM-SHA-512=[name=root,password="root secret"]'),
    )
    process.start()
    config = root / "root.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="root" password="root secret";\n'
    )
    try:
        yield process, config
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


def pydmq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pydmq", *args], capture_output=True, text=True, timeout=60
    )


def can_produce(bootstrap: str, mechanism: str, user: str, password: str) -> bool:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": 10000,
            "error_cb": errors.append,
        }
    )
    producer.produce(unique_topic("sasl-cli"), b"x")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:  # delivered, or refused: no need to wait out the timeout
        left = producer.flush(0.2)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            return False
        if left == 0:
            return True
    return False


def test_seed_then_users_add_list_delete(broker: tuple[SaslBrokerProcess, Path]) -> None:
    process, config = broker
    b = process.bootstrap
    assert can_produce(b, "SCRAM-SHA-512", "root", "root secret")
    added = pydmq(
        "users",
        "add",
        "carl",
        "--password",
        "carl-pw",
        "--iterations",
        "8192",
        "-b",
        b,
        "--command-config",
        str(config),
    )
    assert added.returncode == 0, added.stderr
    listed = pydmq("users", "list", "-b", b, "--command-config", str(config))
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert ["carl", "SCRAM-SHA-256", "8192"] in rows
    assert ["root", "SCRAM-SHA-512", "4096"] in rows
    assert can_produce(b, "SCRAM-SHA-256", "carl", "carl-pw")
    deleted = pydmq("users", "delete", "carl", "-b", b, "--command-config", str(config))
    assert deleted.returncode == 0, deleted.stderr
    assert not can_produce(b, "SCRAM-SHA-256", "carl", "carl-pw")
    again = pydmq("users", "delete", "carl", "-b", b, "--command-config", str(config))
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stderr


def test_without_credentials_the_cli_is_refused(broker: tuple[SaslBrokerProcess, Path]) -> None:
    process, config = broker
    wrong = config.parent / "wrong.properties"
    wrong.write_text(config.read_text().replace("root secret", "nope"))
    refused = pydmq("users", "list", "-b", process.bootstrap, "--command-config", str(wrong))
    assert refused.returncode != 0
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr


def test_seed_survives_a_restart_and_is_not_applied_again(
    broker: tuple[SaslBrokerProcess, Path],
) -> None:
    process, config = broker
    process.restart()
    deadline = time.monotonic() + 30
    while not can_produce(process.bootstrap, "SCRAM-SHA-512", "root", "root secret"):
        assert time.monotonic() < deadline, "the seeded user cannot log in after a restart"
        time.sleep(0.5)
    plain = config.parent / "plain.properties"
    plain.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
    )
    deleted = pydmq(
        "users",
        "delete",
        "root",
        "--mechanism",
        "SCRAM-SHA-512",
        "-b",
        process.bootstrap,
        "--command-config",
        str(plain),
    )
    assert deleted.returncode == 0, deleted.stderr
    process.restart()  # still started with --add-scram root
    assert "--add-scram ignored" in process.log_tail(20_000)
    assert not can_produce(process.bootstrap, "SCRAM-SHA-512", "root", "root secret")
