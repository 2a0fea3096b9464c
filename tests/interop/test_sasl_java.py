"""The Java client (kafka-clients 4.4, through Kafka's own console producer and consumer)
authenticates with PLAIN and SCRAM-SHA-256/512 over SASL_PLAINTEXT, produces and consumes;
with a 2-second session lifetime (KIP-368) its producer re-authenticates in place and keeps
producing, and the broker never has to close an expired session."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .differential_support import KAFKA_DIR
from .sasl_support import SaslBrokerProcess
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

CLASSPATH = str(KAFKA_DIR / "dist" / "*")
SCRAM = (
    "SCRAM-SHA-256=[name=bob,password=bob-secret]",
    "SCRAM-SHA-512=[name=bob,password=bob-secret]",
)


@pytest.fixture(scope="module")
def broker() -> Iterator[SaslBrokerProcess]:
    if shutil.which("java") is None or not list((KAFKA_DIR / "dist").glob("kafka-tools-*.jar")):
        pytest.skip("java or compat/kafka/dist (Kafka's tools) missing: run ./scripts/test")
    root = Path(tempfile.mkdtemp(prefix="pydmq-sasl-java-"))
    process = SaslBrokerProcess(
        root / "data",
        {"connections.max.reauth.ms": "2000"},
        extra_args=tuple(arg for s in SCRAM for arg in ("--add-scram", s)),
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()
        shutil.rmtree(root, ignore_errors=True)


def client_config(tmp: Path, mechanism: str, user: str, password: str) -> Path:
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )
    path = tmp / f"{mechanism}-{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        f"sasl.mechanism={mechanism}\n"
        f'sasl.jaas.config={module} required username="{user}" password="{password}";\n'
    )
    return path


def java(tool: str, *args: str, stdin: bytes | None = None, timeout: float = 120) -> str:
    proc = subprocess.run(
        [
            "java",
            "-Xss1m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            CLASSPATH,
            tool,
            *args,
        ],
        input=stdin,
        capture_output=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    return proc.stdout.decode()


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ],
)
def test_java_produces_and_consumes(
    broker: SaslBrokerProcess, tmp_path: Path, mechanism: str, user: str, password: str
) -> None:
    config = client_config(tmp_path, mechanism, user, password)
    topic = unique_topic("sasl-java")
    lines = [f"v{i}" for i in range(20)]
    java(
        "org.apache.kafka.tools.ConsoleProducer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--command-config",
        str(config),
        stdin="\n".join(lines).encode() + b"\n",
    )
    out = java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "20",
        "--timeout-ms",
        "60000",
        "--command-config",
        str(config),
    )
    assert sorted(out.split()) == sorted(lines)


def test_java_reauthenticates_and_keeps_producing(
    broker: SaslBrokerProcess, tmp_path: Path
) -> None:
    config = client_config(tmp_path, "SCRAM-SHA-512", "bob", "bob-secret")
    topic = unique_topic("sasl-java-reauth")
    producer = subprocess.Popen(
        [
            "java",
            "-Xss1m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            CLASSPATH,
            "org.apache.kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            topic,
            "--command-config",
            str(config),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert producer.stdin is not None
    try:
        for i in range(16):  # about 8 s: four session lifetimes
            producer.stdin.write(f"r{i}\n".encode())
            producer.stdin.flush()
            time.sleep(0.5)
        producer.stdin.close()
        producer.wait(60)
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait(10)
    assert producer.returncode == 0
    out = java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server",
        broker.bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "16",
        "--timeout-ms",
        "60000",
        "--command-config",
        str(config),
    )
    assert sorted(out.split()) == sorted(f"r{i}" for i in range(16))
    assert "session expired" not in broker.log_tail(200_000)
