"""Consumer groups with real clients against a pydmq broker process.

Covers: subscribe + commit + restart from the committed offset (librdkafka), kafka-python and
aiokafka groups, two librdkafka members sharing a 6-partition topic disjointly, a member
killed with SIGKILL (its partitions move to the survivor, nothing skipped), committed offsets
(metadata with control characters) surviving a broker kill -9, and static membership (a member
restarting with the same group.instance.id gets its partitions back without a rebalance), and
a kafka-python member keeping its generation and assignment across a broker restart (the load
restores classic groups with their members).
Every wait is bounded; only PIDs started here are signalled.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as TopicPartitionKP

from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic

from .conftest import BrokerProcess
from .support import unique_topic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = pytest.mark.interop

TIMEOUT = 60.0
GROUP_OVERRIDES = {
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "10",
}
CHILD = Path(__file__).resolve().parent / "groups_child" / "member.py"


@pytest.fixture(scope="module")
def gbroker() -> Iterator[BrokerProcess]:
    if os.environ.get("PYDMQ_TEST_BOOTSTRAP"):
        pytest.skip("needs its own broker process")
    root = Path(tempfile.mkdtemp(prefix="pydmq-groups-"))
    b = BrokerProcess(root / "data", GROUP_OVERRIDES)
    b.start()
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


def create_topic(bootstrap: str, partitions: int) -> str:
    name = unique_topic("grp")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(TIMEOUT)
    return name


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=b"%d" % i, partition=i % partitions)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(TIMEOUT) == 0


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            **conf,
        }
    )


def poll_values(c: Consumer, out: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for msg in c.consume(num_messages=1000, timeout=0.2):
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                continue
            out.append(int(msg.value()))


def test_commit_and_restart_reads_from_committed_offset(gbroker: BrokerProcess) -> None:
    topic = create_topic(gbroker.bootstrap, 3)
    produce(gbroker.bootstrap, topic, 300, 3)
    group = unique_topic("restart")
    c = consumer(gbroker.bootstrap, group)
    c.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 300 and time.monotonic() < deadline:
        poll_values(c, seen, 0.5)
    assert sorted(seen) == list(range(300))
    c.commit(asynchronous=False)
    c.close()
    produce(gbroker.bootstrap, topic, 30, 3)  # values 0..29 again, at offsets 100..109
    c = consumer(gbroker.bootstrap, group)
    c.subscribe([topic])
    again: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(again) < 30 and time.monotonic() < deadline:
        poll_values(c, again, 0.5)
    poll_values(c, again, 1.0)
    c.close()
    assert sorted(again) == list(range(30)), "restart must resume at the committed offsets"


def test_two_members_share_partitions_disjointly(gbroker: BrokerProcess) -> None:
    count = 6000
    topic = create_topic(gbroker.bootstrap, 6)
    group = unique_topic("pair")
    assignments: dict[str, set[int]] = {"a": set(), "b": set()}

    def on_assign(name: str):
        def cb(_c: Consumer, parts: list[TopicPartition]) -> None:
            assignments[name] = {p.partition for p in parts}

        return cb

    a = consumer(gbroker.bootstrap, group)
    b = consumer(gbroker.bootstrap, group)
    a.subscribe([topic], on_assign=on_assign("a"))
    b.subscribe([topic], on_assign=on_assign("b"))
    got: dict[str, list[int]] = {"a": [], "b": []}
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not (
        assignments["a"]
        and assignments["b"]
        and assignments["a"] | assignments["b"] == set(range(6))
    ):
        poll_values(a, got["a"], 0.2)
        poll_values(b, got["b"], 0.2)
    produce(gbroker.bootstrap, topic, count, 6)  # the group is stable: each record once
    while time.monotonic() < deadline and len(got["a"]) + len(got["b"]) < count:
        poll_values(a, got["a"], 0.2)
        poll_values(b, got["b"], 0.2)
    a.close()
    b.close()
    assert assignments["a"] and assignments["b"]
    assert assignments["a"].isdisjoint(assignments["b"])
    assert assignments["a"] | assignments["b"] == set(range(6))
    assert got["a"] and got["b"]
    assert sorted(got["a"] + got["b"]) == list(range(count)), "every record exactly once"


def _spawn_member(bootstrap: str, topic: str, group: str, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), bootstrap, topic, group, str(out)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


def _child_values(out: Path) -> set[int]:
    values: set[int] = set()
    if out.exists():
        for line in out.read_text().splitlines():
            if line.startswith("v "):
                values.add(int(line.split()[1]))
    return values


def test_sigkill_member_hands_partitions_over_nothing_skipped(
    gbroker: BrokerProcess, tmp_path: Path
) -> None:
    count = 3000
    topic = create_topic(gbroker.bootstrap, 6)
    produce(gbroker.bootstrap, topic, count, 6)
    group = unique_topic("kill")
    out = tmp_path / "child.txt"
    child = _spawn_member(gbroker.bootstrap, topic, group, out)
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(_child_values(out)) < 50 and time.monotonic() < deadline:
            assert child.poll() is None, "member child exited"
            time.sleep(0.1)
        assert _child_values(out), "the child consumed nothing"
        assigned: list[set[int]] = []
        survivor = consumer(gbroker.bootstrap, group, **{"session.timeout.ms": 3000})
        survivor.subscribe(
            [topic], on_assign=lambda _c, parts: assigned.append({p.partition for p in parts})
        )
        mine: list[int] = []
        deadline = time.monotonic() + TIMEOUT
        while not assigned and time.monotonic() < deadline:
            poll_values(survivor, mine, 0.2)
        assert assigned and len(assigned[-1]) < 6, "the child should keep some partitions"
        poll_values(survivor, mine, 0.5)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            poll_values(survivor, mine, 0.3)
            if assigned[-1] == set(range(6)) and set(mine) | _child_values(out) >= set(
                range(count)
            ):
                break
        took = time.monotonic() - killed_at
        survivor.close()
        assert assigned[-1] == set(range(6)), f"assignments seen: {assigned}"
        missing = set(range(count)) - (set(mine) | _child_values(out))
        assert not missing, f"{len(missing)} records skipped (took {took:.1f}s)"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)


def test_committed_offsets_survive_broker_kill9(tmp_path: Path) -> None:
    if os.environ.get("PYDMQ_TEST_BOOTSTRAP"):
        pytest.skip("needs its own broker process")
    b = BrokerProcess(tmp_path / "data", GROUP_OVERRIDES)
    b.start()
    metadata = "\x00\x01\n\t\x7f\x1b[0m é 漢字 🎉"
    ck_metadata = "\x01\x02\n\t\x7f é"
    try:
        topic = create_topic(b.bootstrap, 2)
        with RawClient(b.bootstrap) as raw:
            body = raw.request(
                8,
                9,
                OffsetCommitRequest(
                    group_id="kill9",
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    topics=[
                        OffsetCommitRequestTopic(
                            name=topic,
                            partitions=[
                                OffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=1234,
                                    committed_leader_epoch=0,
                                    committed_metadata=metadata,
                                )
                            ],
                        )
                    ],
                ),
            ).body
            assert body.topics[0].partitions[0].error_code == 0
        c = consumer(b.bootstrap, "kill9-ck")
        c.commit(offsets=[TopicPartition(topic, 1, 77, metadata=ck_metadata)], asynchronous=False)
        c.close()
        b.kill(signal.SIGKILL)
        b.start()
        with RawClient(b.bootstrap) as raw:
            for version in (5, 7):
                fetched = raw.request(
                    9,
                    version,
                    OffsetFetchRequest(
                        group_id="kill9",
                        topics=[OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
                    ),
                ).body
                part = fetched.topics[0].partitions[0]
                assert (part.committed_offset, part.metadata) == (1234, metadata)
        c = consumer(b.bootstrap, "kill9-ck")
        (tp,) = c.committed([TopicPartition(topic, 1)], timeout=30)
        c.close()
        assert (tp.offset, tp.metadata) == (77, ck_metadata)
    finally:
        b.stop()


def test_static_member_restart_keeps_partitions_without_rebalance(
    gbroker: BrokerProcess,
) -> None:
    topic = create_topic(gbroker.bootstrap, 6)
    group = unique_topic("static")
    events: dict[str, list[tuple[str, set[int]]]] = {"a": [], "b": []}

    def member(name: str, instance: str) -> Consumer:
        c = consumer(
            gbroker.bootstrap,
            group,
            **{
                "group.instance.id": instance,
                "session.timeout.ms": 10000,
            },
        )
        c.subscribe(
            [topic],
            on_assign=lambda _c, p: events[name].append(("assign", {x.partition for x in p})),
            on_revoke=lambda _c, p: events[name].append(("revoke", {x.partition for x in p})),
        )
        return c

    a = member("a", "static-a")
    b = member("b", "static-b")
    sink: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        poll_values(a, sink, 0.2)
        poll_values(b, sink, 0.2)
        assigned_a = [e for e in events["a"] if e[0] == "assign"]
        assigned_b = [e for e in events["b"] if e[0] == "assign"]
        if (
            assigned_a
            and assigned_b
            and assigned_a[-1][1]
            and assigned_b[-1][1]
            and (assigned_a[-1][1] | assigned_b[-1][1] == set(range(6)))
        ):
            break
    before_a = events["a"][-1][1]
    b_events_before = len(events["b"])
    a.close()  # a static member does not leave the group on close
    events["a2"] = []
    stop = threading.Event()

    def keep_b_alive() -> None:
        while not stop.is_set():
            poll_values(b, sink, 0.2)

    keeper = threading.Thread(target=keep_b_alive, daemon=True)
    keeper.start()
    try:
        a2 = member("a2", "static-a")
        deadline = time.monotonic() + TIMEOUT
        while not events["a2"] and time.monotonic() < deadline:
            poll_values(a2, sink, 0.2)
        poll_values(a2, sink, 1.0)
    finally:
        stop.set()
        keeper.join(10)
    b_during = events["b"][b_events_before:]
    a2.close()
    b.close()
    assert events["a2"] and events["a2"][0] == ("assign", before_a)
    assert b_during == [], f"b saw a rebalance: {b_during}"


def test_kafka_python_and_aiokafka_groups(gbroker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    topic = create_topic(gbroker.bootstrap, 3)
    produce(gbroker.bootstrap, topic, 90, 3)
    kp = KafkaConsumer(
        topic,
        bootstrap_servers=gbroker.bootstrap,
        group_id=unique_topic("kp"),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20000,
    )
    values = []
    for msg in kp:
        values.append(int(msg.value))
        if len(values) == 90:
            break
    kp.commit()
    committed = {p: kp.committed(TopicPartitionKP(topic, p)) for p in range(3)}
    kp.close()
    assert sorted(values) == list(range(90)) and set(committed.values()) == {30}

    async def aio() -> list[int]:
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=gbroker.bootstrap,
            group_id=unique_topic("aio"),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        out: list[int] = []
        try:
            async with asyncio.timeout(TIMEOUT):
                while len(out) < 90:
                    batch = await c.getmany(timeout_ms=500)
                    for msgs in batch.values():
                        out.extend(int(m.value) for m in msgs)
            await c.commit()
        finally:
            await c.stop()
        return out

    assert sorted(asyncio.run(aio())) == list(range(90))


@pytest.mark.timeout(180)
def test_a_classic_member_keeps_its_generation_across_a_broker_restart(tmp_path: Path) -> None:
    """A single node restarts within the member's session timeout: the load restores the
    classic group with its members (as Kafka's), so the kafka-python member's heartbeats
    succeed at its old generation, with no rebalance."""
    if os.environ.get("PYDMQ_TEST_BOOTSTRAP"):
        pytest.skip("needs its own broker process")
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    events: list[tuple[str, list[int]]] = []

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: set[TopicPartitionKP]) -> None:
            events.append(("revoked", sorted(p.partition for p in revoked)))

        def on_partitions_assigned(self, assigned: set[TopicPartitionKP]) -> None:
            events.append(("assigned", sorted(p.partition for p in assigned)))

    b = BrokerProcess(tmp_path / "data", GROUP_OVERRIDES)
    b.start()
    kp = None
    try:
        topic = create_topic(b.bootstrap, 3)
        kp = KafkaConsumer(
            bootstrap_servers=b.bootstrap,
            group_id=unique_topic("restart-generation"),
            session_timeout_ms=30_000,
            heartbeat_interval_ms=300,
            enable_auto_commit=False,
        )
        kp.subscribe([topic], listener=Listener())
        coordinator = kp._coordinator
        deadline = time.monotonic() + TIMEOUT
        while coordinator.generation_if_stable() is None or len(kp.assignment()) < 3:
            assert time.monotonic() < deadline, "never joined"
            kp.poll(timeout_ms=200)
        before = coordinator.generation_if_stable()
        assignment = kp.assignment()
        rebalances = list(events)
        assert rebalances[-1] == ("assigned", [0, 1, 2])
        b.restart()
        restarted = time.monotonic()
        deadline = restarted + TIMEOUT
        # the member's heartbeats reach the restarted broker and succeed (a few of them)
        while coordinator.heartbeat.last_receive < restarted + 2.0:
            assert time.monotonic() < deadline, "no heartbeat succeeded after the restart"
            kp.poll(timeout_ms=200)
        after = coordinator.generation_if_stable()
        assert after is not None
        assert (after.generation_id, after.member_id) == (
            before.generation_id,
            before.member_id,
        )
        assert kp.assignment() == assignment
        assert events == rebalances, "no rebalance"
    finally:
        if kp is not None:
            kp.close()
        b.stop()
