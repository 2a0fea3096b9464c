"""A 3-node pydmq cluster of real processes on loopback, with real faults.

RF=3, min.insync.replicas=2. A confluent-kafka producer (acks=all, idempotence on) streams
unique values while the test ``kill -9``s the leader of partition 0, restarts it, kills the
active controller, restarts it, and SIGSTOPs a follower for a while. Afterwards:

* every acknowledged record is read back at the offset its delivery report gave;
* no value appears twice (idempotence survives leader changes);
* per partition, offsets follow the produce order;
* once the ISR is full again, every replica's log holds the same batches (compared offline,
  segment by segment, after a graceful stop).

Also: with two of three nodes down, acks=-1 fails with NOT_ENOUGH_REPLICAS and nothing of it
becomes visible; kafka-python and the Java producer follow a leader change; a DeleteRecords is
answered only once every replica has the new log start, so a leader killed right after the
answer is succeeded by one without the deleted records, and a follower refuses it.
"""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.client import KafkaClient
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, replica_batches

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

PARTITIONS = 3
NODE_CONFIG = FAST_FAILOVER


LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-cluster-"))
    c = ClusterProcess(3, root, NODE_CONFIG)
    c.start()
    try:
        c.wait_for_brokers(3, timeout=30)
        yield c
    finally:
        c.stop()
        c.copy_logs(LOG_DIR / request.node.name)  # the last run of each test, for post-mortems
        shutil.rmtree(root, ignore_errors=True)


def _client(cluster: ClusterProcess) -> KafkaClient:
    return KafkaClient([cluster.node(i).bootstrap for i in cluster.running()], timeout=3.0)


def _metadata(
    cluster: ClusterProcess, topic: str
) -> tuple[int, dict[int, tuple[int, list[int], list[int]]]]:
    """(controller id, {partition: (leader, replicas, isr)}) from any running node."""
    with _client(cluster) as client:
        response = client.refresh_metadata([topic])
        parts: dict[int, tuple[int, list[int], list[int]]] = {}
        for t in response.topics:
            if t.name == topic:
                for p in t.partitions:
                    parts[p.partition_index] = (
                        p.leader_id,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                    )
        return response.controller_id, parts


def _create_topic(
    cluster: ClusterProcess,
    topic: str,
    partitions: int = PARTITIONS,
    assignment: list[list[int]] | None = None,
    strategy: str = "isr",
) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    config = {"min.insync.replicas": "2", "pydmq.replication.strategy": strategy}
    new_topic = (
        confluent_admin.NewTopic(
            topic, len(assignment), -1, replica_assignment=assignment, config=config
        )
        if assignment
        else confluent_admin.NewTopic(topic, partitions, 3, config=config)
    )
    futures = admin.create_topics([new_topic], request_timeout=15)
    futures[topic].result(20)
    rf = len(assignment[0]) if assignment else 3

    def ready() -> bool:
        _, parts = _metadata(cluster, topic)
        return len(parts) == partitions and all(
            leader >= 0 and len(isr) == rf for leader, _, isr in parts.values()
        )

    cluster.wait_for(f"{topic} led with a full ISR", ready, timeout=30)


def _wait_full_isr(cluster: ClusterProcess, topic: str, timeout: float = 45) -> None:
    seen: list[object] = []

    def full() -> bool:
        _, parts = _metadata(cluster, topic)
        seen[:] = [parts]
        return bool(parts) and all(
            leader >= 0 and len(isr) == 3 for leader, _, isr in parts.values()
        )

    try:
        cluster.wait_for(f"{topic}: every ISR back to 3", full, timeout=timeout)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last metadata {seen}") from None


class StreamingProducer(threading.Thread):
    """Produces value i (key k<i>) in order until stopped; records every delivery report."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.stop_event = threading.Event()
        self.acked: dict[int, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failed: dict[int, str] = {}
        self.sent = 0
        self.lock = threading.Lock()

    def _report(self, err: object, msg: object) -> None:
        value = int(msg.value())  # type: ignore[attr-defined]
        with self.lock:
            if err is not None:
                self.failed[value] = str(err)
            else:
                self.acked[value] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def wait_acked_more(self, extra: int, timeout: float) -> float:
        """Seconds until ``extra`` more records are acknowledged (TimeoutError otherwise)."""
        start = time.monotonic()
        target = self.acked_count() + extra
        while self.acked_count() < target:
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"{extra} more acks not seen in {timeout} s")
            time.sleep(0.02)
        return time.monotonic() - start

    def run(self) -> None:
        i = 0
        while not self.stop_event.is_set():
            try:
                self.producer.produce(
                    self.topic,
                    key=f"k{i}".encode(),
                    value=str(i).encode(),
                    on_delivery=self._report,
                )
                i += 1
                self.sent = i
            except BufferError:
                self.producer.poll(0.05)
                continue
            if i % 50 == 0:
                self.producer.poll(0)
                time.sleep(0.005)
        self.producer.flush(90)


def _read_all(cluster: ClusterProcess, topic: str) -> dict[int, list[tuple[int, int]]]:
    """{partition: [(offset, value)]} from offset 0 up to the high watermark."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        ends = {}
        for p in range(PARTITIONS):
            _, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(topic, p), timeout=15
            )
            ends[p] = high
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 90
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, (
                f"read-back stalled: ends {ends}, read up to "
                f"{ {p: (e[-1][0] if e else None) for p, e in out.items()} }"
            )
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    continue
                out[msg.partition()].append((msg.offset(), int(msg.value())))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("strategy", ["isr", "quorum"])
def test_acks_all_survives_leader_controller_and_follower_faults(
    cluster: ClusterProcess, strategy: str
) -> None:
    """Both built-in replication strategies face the same faults and the same checks."""
    topic = "faults"
    _create_topic(cluster, topic, strategy=strategy)
    producer = StreamingProducer(cluster.bootstrap, topic)
    producer.start()
    outages: dict[str, float] = {}
    try:
        producer.wait_acked_more(2000, timeout=30)

        # 1. kill -9 the leader of partition 0, measure time to acks again, restart it.
        _, parts = _metadata(cluster, topic)
        leader = parts[0][0]
        cluster.kill(leader, signal.SIGKILL)
        outages["partition leader kill -9"] = producer.wait_acked_more(500, timeout=60)
        cluster.start_node(leader)
        _wait_full_isr(cluster, topic)
        producer.wait_acked_more(1000, timeout=30)

        # 2. kill -9 the active controller, restart it.
        controller, _ = _metadata(cluster, topic)
        assert controller in cluster.nodes, f"no active controller in Metadata ({controller})"
        cluster.kill(controller, signal.SIGKILL)
        outages["controller kill -9"] = producer.wait_acked_more(500, timeout=60)
        cluster.start_node(controller)
        _wait_full_isr(cluster, topic)

        # 3. SIGSTOP a follower of partition 0 for longer than replica.lag.time.max.ms.
        _, parts = _metadata(cluster, topic)
        leader, replicas, _ = parts[0]
        follower = next(r for r in replicas if r != leader)
        cluster.pause(follower)
        try:
            producer.wait_acked_more(1000, timeout=60)
            time.sleep(4)
            producer.wait_acked_more(500, timeout=60)
        finally:
            cluster.resume(follower)
        _wait_full_isr(cluster, topic)
        producer.wait_acked_more(1000, timeout=30)
    finally:
        producer.stop_event.set()
        producer.join(120)
    print(
        f"outages until the next 500 acks: {outages}; acked {len(producer.acked)}, "
        f"failed {len(producer.failed)}, sent {producer.sent}"
    )
    assert not producer.is_alive(), "producer did not finish flushing"

    read = _read_all(cluster, topic)
    at: dict[tuple[int, int], int] = {}
    seen: dict[int, tuple[int, int]] = {}
    for p, entries in read.items():
        for offset, value in entries:
            at[(p, offset)] = value
            assert value not in seen, f"value {value} at {(p, offset)} and at {seen[value]}"
            seen[value] = (p, offset)
    lost = [v for v, where in producer.acked.items() if at.get(where) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:10]}"
    for p, entries in read.items():
        values = [v for _, v in entries]
        assert values == sorted(values), f"partition {p}: order differs from produce order"
        offsets = [o for o, _ in entries]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets not contiguous"

    # All replicas identical once the ISR is full: compare the logs offline.
    _wait_full_isr(cluster, topic)
    time.sleep(1.0)
    cluster.stop()
    for p in range(PARTITIONS):
        logs = {i: replica_batches(node.data_dir, topic, p) for i, node in cluster.nodes.items()}
        first = next(iter(logs.values()))
        assert first, f"partition {p}: empty replica"
        for i, batches in logs.items():
            assert batches == first, f"partition {p}: replica on node {i} differs"


def test_acks_all_with_one_in_sync_replica_fails_and_writes_nothing(
    cluster: ClusterProcess,
) -> None:
    # Two of the three voters stay up so the controller can shrink the ISR: the topic lives
    # on the two nodes that are not the active controller, and one of them is killed.
    topic = "min-isr"
    controller, _ = _metadata(cluster, "__none__")
    pair = [i for i in sorted(cluster.nodes) if i != controller][:2]
    _create_topic(cluster, topic, partitions=1, assignment=[pair])
    _, parts = _metadata(cluster, topic)
    leader, replicas, _ = parts[0]
    follower = next(r for r in replicas if r != leader)
    cluster.kill(follower, signal.SIGKILL)

    def shrunk() -> bool:
        _, now = _metadata(cluster, topic)
        return now[0][2] == [leader]

    cluster.wait_for("ISR shrunk to the leader", shrunk, timeout=30)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.node(leader).bootstrap,
            "acks": "all",
            "message.timeout.ms": 4000,
            "retries": 0,
        }
    )
    errors: list[object] = []
    producer.produce(topic, value=b"must-not-be-visible", on_delivery=lambda e, m: errors.append(e))
    producer.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() in (  # type: ignore[attr-defined]
        confluent_kafka.KafkaError.NOT_ENOUGH_REPLICAS,
    ), errors[0]
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.node(leader).bootstrap, "group.id": "minisr"}
    )
    try:
        low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10
        )
        assert (low, high) == (0, 0), "a rejected acks=all write became visible"
    finally:
        consumer.close()


def test_kafka_python_and_java_follow_a_leader_change(cluster: ClusterProcess) -> None:
    kafka = pytest.importorskip("kafka")
    from .support import java_ready, run_java

    topic = "follow"
    _create_topic(cluster, topic, partitions=1)
    producer = kafka.KafkaProducer(
        bootstrap_servers=cluster.bootstrap.split(","),
        acks="all",
        retries=20,
        request_timeout_ms=10000,
        metadata_max_age_ms=1000,
    )
    futures = [producer.send(topic, value=f"a{i}".encode()) for i in range(200)]
    producer.flush(30)
    assert all(f.get(10).offset == i for i, f in enumerate(futures))
    _, parts = _metadata(cluster, topic)
    old_leader = parts[0][0]
    cluster.kill(old_leader, signal.SIGKILL)
    futures = [producer.send(topic, value=f"b{i}".encode()) for i in range(200)]
    producer.flush(60)
    offsets = [f.get(30).offset for f in futures]
    assert offsets == list(range(200, 400))
    producer.close(10)
    _, parts = _metadata(cluster, topic)
    assert parts[0][0] not in (old_leader, -1)

    reason = java_ready()
    if reason:
        pytest.fail(reason)
    alive = ",".join(cluster.node(i).bootstrap for i in cluster.running())
    run_java(["produce", "--bootstrap", alive, "--topic", topic, "--count", "300", "--acks", "all"])
    cluster.start_node(old_leader)
    _wait_full_isr(cluster, topic)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=cluster.bootstrap.split(","),
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 700 and time.monotonic() < deadline:
        for records in consumer.poll(1000).values():
            got.extend(r.offset for r in records)
    consumer.close()
    assert got == list(range(700))


def test_group_offsets_survive_the_coordinators_death(cluster: ClusterProcess) -> None:
    """Committed offsets live in the replicated ``__consumer_offsets``: after the group's
    coordinator (leader of its offsets partition) is killed, a new member of the group resumes
    exactly where the first one committed, through the new coordinator."""
    from pydmq.groups.log import OFFSETS_TOPIC, partition_for

    topic, group, total = "grouped", "cluster-group", 3000
    _create_topic(cluster, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(total):
        producer.produce(topic, key=f"k{i}".encode(), value=str(i).encode())
    assert producer.flush(30) == 0

    def member() -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        consumer.subscribe([topic])
        return consumer

    first = member()
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while len(seen) < 1000:
        assert time.monotonic() < deadline, f"first member read only {len(seen)}"
        for msg in first.consume(1000 - len(seen), 1.0):
            if not msg.error():
                seen.append(int(msg.value()))
    first.commit(asynchronous=False)
    first.close()

    offsets_partition = partition_for(group, 50)
    _, parts = _metadata(cluster, OFFSETS_TOPIC)
    coordinator = parts[offsets_partition][0]
    assert coordinator in cluster.nodes
    cluster.kill(coordinator, signal.SIGKILL)

    second = member()
    rest: list[int] = []
    deadline = time.monotonic() + 90
    try:
        while len(seen) + len(rest) < total:
            assert time.monotonic() < deadline, f"second member read {len(rest)}"
            for msg in second.consume(1000, 1.0):
                if not msg.error():
                    rest.append(int(msg.value()))
        second.commit(asynchronous=False)
    finally:
        second.close()
    assert not set(seen) & set(rest), "records committed by the first member were read again"
    assert sorted(seen + rest) == list(range(total))


def _earliest(cluster: ClusterProcess, node_id: int, topic: str, partition: int) -> int:
    """ListOffsets earliest answered by ``node_id`` (-1 while it answers a retriable error)."""
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-2)],
            )
        ],
    )
    with KafkaClient(cluster.node(node_id).bootstrap, timeout=3.0) as client:
        answer = client.call(request, ListOffsetsResponse).topics[0].partitions[0]
    if answer.error_code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    ):
        return -1
    assert answer.error_code == ErrorCode.NONE, answer
    return int(answer.offset)


def test_delete_records_survives_killing_the_leader_right_after(
    cluster: ClusterProcess,
) -> None:
    topic = "delete-records"
    # Node 1 leads every partition; each follower becomes a new leader of one of them.
    _create_topic(cluster, topic, assignment=[[1, 2, 3], [1, 3, 2], [1, 2, 3]])
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30 * PARTITIONS):
        producer.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    # A follower refuses, and nothing moves.
    request = DeleteRecordsRequest(
        timeout=5000,
        topics=[
            DeleteRecordsTopic(
                name=topic, partitions=[DeleteRecordsPartition(partition_index=0, offset=5)]
            )
        ],
    )
    with KafkaClient(cluster.node(2).bootstrap, timeout=5.0) as client:
        refused = client.call(request, DeleteRecordsResponse).topics[0].partitions[0]
    assert (refused.error_code, refused.low_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
    assert _earliest(cluster, 1, topic, 0) == 0

    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.delete_records(
        [confluent_kafka.TopicPartition(topic, q, 15) for q in range(PARTITIONS)]
    )
    lows = {tp.partition: f.result(15).low_watermark for tp, f in futures.items()}
    cluster.kill(1, signal.SIGKILL)  # at once: the answer must mean every replica has it
    assert lows == dict.fromkeys(range(PARTITIONS), 15)

    def new_leaders() -> bool:
        _, parts = _metadata(cluster, topic)
        return len(parts) == PARTITIONS and all(leader in (2, 3) for leader, _, _ in parts.values())

    cluster.wait_for("new leaders", new_leaders, timeout=15)
    _, parts = _metadata(cluster, topic)
    deadline = time.monotonic() + 10
    for q, (leader, _, _) in sorted(parts.items()):
        while (earliest := _earliest(cluster, leader, topic, q)) < 0:
            assert time.monotonic() < deadline, f"partition {q}: no ListOffsets answer"
            time.sleep(0.1)
        assert earliest == 15, f"partition {q}: earliest {earliest} on the new leader {leader}"
