"""Share groups (KIP-932) with confluent-kafka's ``ShareConsumer`` (librdkafka 2.16) and
Java's ``KafkaShareConsumer`` (kafka-clients 4.x, ``tests/interop/java/ShareGroupConsumer.java``,
compiled here with javac against ``compat/java/lib``).

Two share consumers on a one-partition topic share its records, every record accepted once;
a released record comes back with a higher delivery count, a rejected one never does, and a
record whose acquisition lock times out is redelivered; the release/reject scenario gives the
same deliveries on the reference Kafka 4.4 (``compat/kafka``). ``share.auto.offset.reset`` is
latest (Kafka's default): a group starts at the log end at its first ShareFetch, so each
test first produces warm-up records until one is delivered, then its own. Every wait is
bounded; the brokers listen on loopback; only the processes started here are stopped.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import BrokerProcess
from .differential_support import ReferenceKafka, reference_kafka_unavailable
from .support import JAVA_DIR, unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

OVERRIDES = {"group.share.heartbeat.interval.ms": "500"}
SHORT_LOCK_MS = 1000
WAIT_S = 30.0


def _broker(overrides: dict[str, str]) -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-share-"))
    b = BrokerProcess(root / "data", {**OVERRIDES, **overrides}).start()
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def share_broker() -> Iterator[BrokerProcess]:
    yield from _broker({})


@pytest.fixture(scope="module")
def short_lock_broker() -> Iterator[BrokerProcess]:
    yield from _broker({"group.share.record.lock.duration.ms": str(SHORT_LOCK_MS)})


def _topic(bootstrap: str) -> str:
    topic = unique_topic("share")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    return topic


def _consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    return consumer


def _poll(consumer: ShareConsumer, timeout: float = 0.2) -> list[Message]:
    return [m for m in consumer.poll(timeout) if m.error() is None]


def _accept(consumer: ShareConsumer, messages: list[Message]) -> None:
    for m in messages:
        consumer.acknowledge(m, AcknowledgeType.ACCEPT)
    if messages:
        assert all(r is None for r in consumer.commit_sync(15).values())


def _warm_up(producer: Producer, topic: str, consumers: list[ShareConsumer]) -> None:
    """Produce warm-up records until one is delivered: the group's share-partition exists
    and starts below every record produced afterwards."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        producer.produce(topic, b"warm-up")
        producer.flush(10)
        for consumer in consumers:
            messages = _poll(consumer)
            _accept(consumer, messages)
            if messages:
                return
    pytest.fail("no warm-up record delivered within 30 s")


def _produce(producer: Producer, topic: str, values: list[str]) -> None:
    for value in values:
        producer.produce(topic, value.encode())
    producer.flush(10)


def test_two_consumers_share_one_partition_each_record_accepted_once(
    share_broker: BrokerProcess,
) -> None:
    bootstrap = share_broker.bootstrap
    topic, group = _topic(bootstrap), f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap})
    consumers = [_consumer(bootstrap, group, topic) for _ in range(2)]
    try:
        _warm_up(producer, topic, consumers)
        values = [f"r{i}" for i in range(200)]
        received: dict[int, list[str]] = {0: [], 1: []}
        deadline = time.monotonic() + WAIT_S
        for burst in range(20):
            _produce(producer, topic, values[burst * 10 : burst * 10 + 10])
            for index, consumer in enumerate(consumers):
                messages = _poll(consumer)
                received[index] += [m.value().decode() for m in messages]
                _accept(consumer, messages)
        while sum(map(len, received.values())) < 200 + 1 and time.monotonic() < deadline:
            for index, consumer in enumerate(consumers):
                messages = _poll(consumer)
                received[index] += [m.value().decode() for m in messages]
                _accept(consumer, messages)
            if sorted(v for vs in received.values() for v in vs if v != "warm-up") == sorted(
                values
            ):
                break
        everything = [v for vs in received.values() for v in vs if v != "warm-up"]
        print(f"records per consumer: {[len(v) for v in received.values()]}")
        assert sorted(everything) == sorted(values)  # each once: none lost, none twice
        # All accepted: nothing comes back.
        for consumer in consumers:
            assert _poll(consumer, 0.5) == []
    finally:
        for consumer in consumers:
            consumer.close()


def _release_and_reject(bootstrap: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Three records accepted, released and rejected: every delivery (value, delivery count)
    until the released one came back and was accepted, then what a further poll returns."""
    topic, group = _topic(bootstrap), f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer = _consumer(bootstrap, group, topic)
    try:
        _warm_up(producer, topic, [consumer])
        _produce(producer, topic, ["keep", "release", "reject"])
        seen: list[tuple[str, int]] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 4 and time.monotonic() < deadline:
            for m in _poll(consumer):
                value = m.value().decode()
                seen.append((value, m.delivery_count()))
                kind = AcknowledgeType.ACCEPT
                if value == "release" and m.delivery_count() == 1:
                    kind = AcknowledgeType.RELEASE
                elif value == "reject":
                    kind = AcknowledgeType.REJECT
                consumer.acknowledge(m, kind)
            assert all(r is None for r in consumer.commit_sync(15).values())
        after = [(m.value().decode(), m.delivery_count()) for m in _poll(consumer, 1.0)]
        return seen, after
    finally:
        consumer.close()


def test_released_record_returns_with_higher_delivery_count_rejected_never(
    share_broker: BrokerProcess,
) -> None:
    seen, after = _release_and_reject(share_broker.bootstrap)
    assert seen == [("keep", 1), ("release", 1), ("reject", 1), ("release", 2)]
    assert after == []  # the rejected record never returns, the accepted ones neither


@pytest.mark.timeout(180)
def test_release_and_reject_as_reference_kafka(share_broker: BrokerProcess) -> None:
    """Differential: the same scenario on the reference Kafka 4.4 (share groups on by default
    there: it finalizes ``share.version`` 2) gives the same deliveries."""
    reason = reference_kafka_unavailable()
    if reason:
        pytest.skip(reason)
    kafka = ReferenceKafka(
        {
            "offsets.topic.replication.factor": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
        }
    ).start()
    try:
        kafka.wait_ready(90)
        reference = _release_and_reject(kafka.bootstrap)
    finally:
        kafka.stop()
        kafka.cleanup()
    assert _release_and_reject(share_broker.bootstrap) == reference


def test_lock_timeout_redelivers_with_higher_delivery_count(
    short_lock_broker: BrokerProcess,
) -> None:
    bootstrap = short_lock_broker.bootstrap
    topic, group = _topic(bootstrap), f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap})
    holder = _consumer(bootstrap, group, topic)
    other = _consumer(bootstrap, group, topic)
    try:
        _warm_up(producer, topic, [holder])
        _produce(producer, topic, ["held"])
        deadline = time.monotonic() + WAIT_S
        held: list[Message] = []
        while not held and time.monotonic() < deadline:
            held = _poll(holder)
        assert [(m.value(), m.delivery_count()) for m in held] == [(b"held", 1)]
        # The holder neither acknowledges nor polls again: its lock runs out.
        again: list[Message] = []
        while not again and time.monotonic() < deadline:
            again = _poll(other)
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"held", 2)]
        _accept(other, again)
    finally:
        other.close()
        holder.close()


def compiled_share_consumer() -> Iterator[Path]:
    """``java/ShareGroupConsumer.java`` compiled into a temporary directory (removed after)."""
    if shutil.which("javac") is None or not list((JAVA_DIR / "lib").glob("kafka-clients-*.jar")):
        pytest.fail("javac or compat/java/lib/kafka-clients-*.jar missing (run ./scripts/test)")
    out = Path(tempfile.mkdtemp(prefix="share-java-"))
    source = Path(__file__).resolve().parent / "java" / "ShareGroupConsumer.java"
    subprocess.run(
        ["javac", "-d", str(out), "-cp", f"{JAVA_DIR / 'lib'}/*", str(source)],
        check=True,
        timeout=120,
    )
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def java_classes() -> Iterator[Path]:
    yield from compiled_share_consumer()


class JavaShareMember:
    """One ShareGroupConsumer process (Java's KafkaShareConsumer); its stdout lines are
    collected by a thread."""

    def __init__(self, classes: Path, bootstrap: str, topic: str, group: str) -> None:
        self.stop_file = classes / f"stop-{uuid.uuid4().hex}"
        cmd = [
            "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{classes}:{JAVA_DIR / 'lib'}/*",
            "ShareGroupConsumer",
            bootstrap,
            topic,
            group,
            "60000",
            str(self.stop_file),
        ]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def values(self) -> list[str]:
        return [line.split()[2] for line in list(self.lines) if line.startswith("R ")]

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._thread.join(timeout=10)


def test_java_and_librdkafka_share_consumers_share_one_partition(
    share_broker: BrokerProcess, java_classes: Path
) -> None:
    bootstrap = share_broker.bootstrap
    topic, group = _topic(bootstrap), f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap})
    java = JavaShareMember(java_classes, bootstrap, topic, group)
    consumer = _consumer(bootstrap, group, topic)
    python_values: list[str] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and "warm-up" not in python_values + java.values():
            producer.produce(topic, b"warm-up")
            producer.flush(10)
            messages = _poll(consumer)
            python_values += [m.value().decode() for m in messages]
            _accept(consumer, messages)
        assert "warm-up" in python_values + java.values(), "no warm-up record within 30 s"
        values = [f"j{i}" for i in range(100)]
        for burst in range(10):
            _produce(producer, topic, values[burst * 10 : burst * 10 + 10])
            messages = _poll(consumer)
            python_values += [m.value().decode() for m in messages]
            _accept(consumer, messages)

        def ours() -> list[str]:
            return [v for v in python_values + java.values() if v != "warm-up"]

        while len(ours()) < len(values) and time.monotonic() < deadline:
            messages = _poll(consumer)
            python_values += [m.value().decode() for m in messages]
            _accept(consumer, messages)
        java.stop()
        print(
            f"records: librdkafka {len([v for v in python_values if v != 'warm-up'])}, "
            f"java {len([v for v in java.values() if v != 'warm-up'])}"
        )
        assert not [line for line in java.lines if line.startswith("E ")]
        assert sorted(ours()) == sorted(values)
    finally:
        java.stop()
        consumer.close()
