"""The consumer group protocol (KIP-848) with real clients: Java (kafka-clients 4.x,
``group.protocol=consumer``) and librdkafka (confluent-kafka, ``group.protocol=consumer``).

The Java consumer is ``tests/interop/java/Kip848Consumer.java``, compiled here with javac
against ``compat/java/lib``. Every wait is bounded; the broker listens on loopback; only the
processes started here are stopped.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pydmq.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from pydmq.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

from .conftest import BrokerProcess
from .support import JAVA_DIR, unique_topic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent
OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
}
PARTITIONS = 6


@pytest.fixture(scope="module")
def kbroker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-kip848-"))
    b = BrokerProcess(root / "data", OVERRIDES).start()
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def java_classes() -> Iterator[Path]:
    if shutil.which("javac") is None or not list((JAVA_DIR / "lib").glob("kafka-clients-*.jar")):
        pytest.fail("javac or compat/java/lib/kafka-clients-*.jar missing (run ./scripts/test)")
    out = Path(tempfile.mkdtemp(prefix="kip848-java-"))
    subprocess.run(
        [
            "javac",
            "-d",
            str(out),
            "-cp",
            f"{JAVA_DIR / 'lib'}/*",
            str(HERE / "java" / "Kip848Consumer.java"),
        ],
        check=True,
        timeout=120,
    )
    yield out
    shutil.rmtree(out, ignore_errors=True)


def _topic(bootstrap: str, records: int) -> str:
    name = unique_topic("kip848")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        f.result(15)
    _produce(bootstrap, name, 0, records)
    return name


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(20) == 0


class JavaMember:
    """One Kip848Consumer process; its stdout lines are collected by a thread."""

    def __init__(self, classes: Path, bootstrap: str, topic: str, group: str) -> None:
        self.stop_file = classes / f"stop-{uuid.uuid4().hex}"
        cmd = [
            "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{classes}:{JAVA_DIR / 'lib'}/*",
            "Kip848Consumer",
            bootstrap,
            topic,
            group,
            "90000",
            str(self.stop_file),
            "group.protocol=consumer",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.errors), daemon=True),
        ]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line.rstrip("\n"))

    @property
    def assignment(self) -> set[int] | None:
        for line in reversed(list(self.lines)):
            if line.startswith("A"):
                rest = line[1:].strip()
                return {int(p) for p in rest.split(",")} if rest else set()
        return None

    def records(self) -> list[tuple[int, int]]:
        out = []
        for line in list(self.lines):
            if line.startswith("R "):
                _, p, o = line.split()
                out.append((int(p), int(o)))
        return out

    def close(self, timeout: float = 30) -> None:
        self.stop_file.touch()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise
        for t in self._threads:
            t.join(5)
        assert "X" in self.lines, self.errors[-30:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _wait(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 15)
        return {tp.partition: tp.offset for tp in parts}
    finally:
        consumer.close()


def test_java_consumer_protocol_consumes_and_commits(
    kbroker: BrokerProcess, java_classes: Path
) -> None:
    topic = _topic(kbroker.bootstrap, 600)
    group = f"g-{uuid.uuid4().hex[:8]}"
    member = JavaMember(java_classes, kbroker.bootstrap, topic, group)
    try:
        _wait(lambda: len(member.records()) >= 600, 60, "600 records")
        member.close()
    finally:
        member.kill()
    assert member.assignment == set()  # revoked on close
    records = member.records()
    assert sorted(records) == sorted({(i % PARTITIONS, i // PARTITIONS) for i in range(600)})
    assert "C" in member.lines and not [x for x in member.lines if x.startswith("E ")]
    assert _committed(kbroker.bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 100)
    admin = AdminClient({"bootstrap.servers": kbroker.bootstrap})
    listed = admin.list_consumer_groups().result(15)
    types = {g.group_id: g.type for g in listed.valid}
    assert str(types[group]).endswith("CONSUMER"), types[group]


def test_two_java_members_share_disjointly_and_leaving_hands_over(
    kbroker: BrokerProcess, java_classes: Path
) -> None:
    topic = _topic(kbroker.bootstrap, 600)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = JavaMember(java_classes, kbroker.bootstrap, topic, group)
    b = JavaMember(java_classes, kbroker.bootstrap, topic, group)
    try:

        def shared() -> bool:
            sa, sb = a.assignment, b.assignment
            return (
                sa is not None
                and sb is not None
                and not sa & sb
                and sa | sb == set(range(PARTITIONS))
                and len(sa) == len(sb) == 3
            )

        _wait(shared, 60, "both members holding 3 disjoint partitions")
        _wait(lambda: len(set(a.records()) | set(b.records())) >= 600, 60, "600 records")
        a_parts = a.assignment
        a.close()
        _wait(lambda: b.assignment == set(range(PARTITIONS)), 30, "B owning all partitions")
        _produce(kbroker.bootstrap, topic, 600, 600)
        _wait(lambda: len(set(a.records()) | set(b.records())) >= 1200, 60, "1200 records")
        b.close()
    finally:
        a.kill()
        b.kill()
    assert a_parts is not None
    every = {(i % PARTITIONS, i // PARTITIONS) for i in range(1200)}
    assert set(a.records()) | set(b.records()) == every
    # A commits after every poll, so a revoked partition resumes at B where A stopped:
    # no record was consumed by both members
    assert not set(a.records()) & set(b.records())
    assert len(a_parts) == 3
    # records after the hand-over (offsets >= 100) were read by B, from the committed offsets
    assert {(p, o) for p, o in every if o >= 100} <= set(b.records())
    assert _committed(kbroker.bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 200)


def test_librdkafka_consumer_protocol(kbroker: BrokerProcess) -> None:
    topic = _topic(kbroker.bootstrap, 600)
    group = f"g-{uuid.uuid4().hex[:8]}"

    def consumer() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": kbroker.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        return c

    first, second = consumer(), consumer()
    seen: dict[str, list[tuple[int, int]]] = {"first": [], "second": []}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for name, c in (("first", first), ("second", second)):
                m = c.poll(0.1)
                if m is not None and not m.error():
                    seen[name].append((m.partition(), m.offset()))
            a = {tp.partition for tp in first.assignment()}
            b = {tp.partition for tp in second.assignment()}
            if (
                len(a) == len(b) == 3
                and not a & b
                and len(seen["first"]) + len(seen["second"]) >= 600
            ):
                break
        a = {tp.partition for tp in first.assignment()}
        b = {tp.partition for tp in second.assignment()}
        assert len(a) == len(b) == 3 and not a & b, (a, b)
        first.commit(asynchronous=False)
        second.commit(asynchronous=False)
        # the first member leaves: the second takes over every partition
        first.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(second.assignment()) < PARTITIONS:
            m = second.poll(0.1)
            if m is not None and not m.error():
                seen["second"].append((m.partition(), m.offset()))
        assert {tp.partition for tp in second.assignment()} == set(range(PARTITIONS))
        while time.monotonic() < deadline and len(set(seen["first"]) | set(seen["second"])) < 600:
            m = second.poll(0.1)
            if m is not None and not m.error():
                seen["second"].append((m.partition(), m.offset()))
        try:
            second.commit(asynchronous=False)
        except KafkaException as exc:  # nothing new since the last commit
            assert exc.args[0].code() == KafkaError._NO_OFFSET
    finally:
        second.close()
    every = {(i % PARTITIONS, i // PARTITIONS) for i in range(600)}
    assert set(seen["first"]) | set(seen["second"]) == every
    assert _committed(kbroker.bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS), 100)


def test_unknown_server_assignor_and_describe(kbroker: BrokerProcess) -> None:
    topic = _topic(kbroker.bootstrap, 6)
    with RawClient(kbroker.bootstrap) as raw:
        response = raw.request(
            68,
            1,
            ConsumerGroupHeartbeatRequest(
                group_id="g-bad-assignor",
                member_id=str(uuid.uuid4()),
                member_epoch=0,
                rebalance_timeout=30000,
                subscribed_topic_names=[topic],
                server_assignor="nope",
                topic_partitions=[],
            ),
        ).body
        assert response.error_code == 112  # UNSUPPORTED_ASSIGNOR
        member_id = str(uuid.uuid4())
        joined = raw.request(
            68,
            1,
            ConsumerGroupHeartbeatRequest(
                group_id="g-range",
                member_id=member_id,
                member_epoch=0,
                rebalance_timeout=30000,
                subscribed_topic_names=[topic],
                server_assignor="range",
                topic_partitions=[],
            ),
        ).body
        assert joined.error_code == 0 and joined.member_epoch == 1
        assert joined.assignment is not None
        assert [sorted(tp.partitions) for tp in joined.assignment.topic_partitions] == [
            list(range(PARTITIONS))
        ]
        described = raw.request(
            69, 1, ConsumerGroupDescribeRequest(group_ids=["g-range", "nope"])
        ).body
        group, unknown = described.groups
        assert (group.error_code, group.group_state, group.assignor_name) == (0, "Stable", "range")
        assert group.members[0].member_id == member_id and group.members[0].member_type == 1
        assert unknown.error_code == 69  # GROUP_ID_NOT_FOUND
        left = raw.request(
            68,
            1,
            ConsumerGroupHeartbeatRequest(group_id="g-range", member_id=member_id, member_epoch=-1),
        ).body
        assert (left.error_code, left.member_epoch) == (0, -1)
