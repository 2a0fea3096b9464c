"""Share groups (KIP-932) on a 3-node cluster, with confluent-kafka's ``ShareConsumer``.

The share-partition state lives with the share coordinator, the leader of its
``__share_group_state`` partition (created by the controller, replication factor 3): the
partition leader reads it at its first ShareFetch and writes every acknowledgement there
(WriteShareGroupState over the inter-broker listener when the coordinator is another node).

The partition's leader is killed (SIGKILL) after half the records were accepted: the new
leader loads the state from the coordinator, so no accepted record is delivered again and
every other record is delivered and accepted, each exactly once. Then the killed node comes
back and the share coordinator's node is killed: the new leader of its ``__share_group_state``
partition loads the replicated state, and only records produced afterwards are delivered.
Last, ``pydmq groups describe`` shows the group's start offset and lag read from the share
coordinators, and ``pydmq groups reset-offsets --to-earliest`` (InitializeShareGroupState at
a new state epoch) makes every record deliverable again.

A GROUP config (``share.auto.offset.reset=earliest``) set through a node that does not lead
the partition reaches the leader with the controller's UpdateMetadata: a new group reads the
records produced before its first fetch. Java's KafkaShareConsumer consumes across a leader kill: every record accepted,
none accepted twice.
Every wait is bounded; the brokers listen on loopback; only the processes started here are
stopped.
"""

from __future__ import annotations

import base64
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.shares.state_log import share_state_partition
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, running_cluster
from support.raw_client import RawClient

from .test_share_groups import JavaShareMember, _consumer, compiled_share_consumer

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"
WAIT_S = 60.0
STATE_TOPIC = "__share_group_state"


@pytest.fixture(scope="module")
def java_classes() -> Iterator[Path]:
    yield from compiled_share_consumer()


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    overrides = {
        **FAST_FAILOVER,
        "share.coordinator.state.topic.num.partitions": 3,
        "group.share.heartbeat.interval.ms": 500,
        "group.share.record.lock.duration.ms": 5000,
    }
    with running_cluster(3, "pydmq-share-cluster-", overrides, LOG_DIR / request.node.name) as c:
        yield c


def _topic_id(cluster: ClusterProcess, topic: str) -> uuid.UUID:
    with RawClient(cluster.bootstrap.split(",")[0], timeout=10) as raw:
        body = raw.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])).body
    return body.topics[0].topic_id


def _coordinator(cluster: ClusterProcess, group: str, topic_id: uuid.UUID) -> int:
    """The share coordinator of the group's share-partition 0: its state partition's leader."""
    state_leaders = _leaders(cluster, STATE_TOPIC)
    return state_leaders.get(share_state_partition((group, topic_id, 0), len(state_leaders)), -1)


def _find_share_coordinator(cluster: ClusterProcess, group: str, topic_id: uuid.UUID) -> int:
    """FindCoordinator key type 2 (share), as a broker asks it: "group:topicId:partition"."""
    topic = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    request = FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{group}:{topic}:0"])
    with RawClient(cluster.bootstrap.split(",")[0], timeout=10) as raw:
        [found] = raw.request(10, 6, request).body.coordinators
    assert found.error_code == 0, found
    return int(found.node_id)


def _leaders(cluster: ClusterProcess, topic: str) -> dict[int, int]:
    """Partition -> leader, as a running node's metadata says (-1: none)."""
    for node_id in cluster.running():
        try:
            with RawClient(cluster.node(node_id).bootstrap, timeout=10) as raw:
                body = raw.request(
                    3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
                ).body
        except (ConnectionError, OSError):
            continue
        [t] = body.topics
        return {p.partition_index: p.leader_id for p in t.partitions}
    return {}


def _until(check, what: str, timeout: float = WAIT_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def _take(consumer: ShareConsumer, accepted: list[str], limit: int | None = None) -> None:
    """Poll once; accept what came (up to ``limit`` in ``accepted`` in all, the rest
    released) and commit the acknowledgements."""
    messages = [m for m in consumer.poll(0.5) if m.error() is None]
    for m in messages:
        value = m.value().decode()
        if limit is None or len(accepted) < limit:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            accepted.append(value)
        else:
            consumer.acknowledge(m, AcknowledgeType.RELEASE)
    if messages:
        results = consumer.commit_sync(15)
        failed = {tp: r for tp, r in results.items() if r is not None}
        assert not failed, failed


def _warm_up(producer: Producer, topic: str, consumer: ShareConsumer) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        producer.produce(topic, b"warm-up")
        producer.flush(10)
        got: list[str] = []
        _take(consumer, got)
        if got:
            return
    pytest.fail("no warm-up record delivered")


def test_accepted_records_survive_the_leader_and_the_share_coordinator(
    cluster: ClusterProcess,
) -> None:
    bootstrap = cluster.bootstrap
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    consumer = _consumer(bootstrap, group, topic)
    try:
        _warm_up(producer, topic, consumer)
        values = [f"r{i}" for i in range(100)]
        for value in values:
            producer.produce(topic, value.encode())
        producer.flush(15)
        first: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(first) < 50 and time.monotonic() < deadline:
            _take(consumer, first, limit=50)
        first = [v for v in first if v != "warm-up"]
        assert len(first) >= 40, first
        consumer.close()

        topic_id = _topic_id(cluster, topic)
        leader = _leaders(cluster, topic)[0]
        coordinator = _coordinator(cluster, group, topic_id)
        print(f"partition leader {leader}, share coordinator {coordinator}")
        assert leader > 0 and coordinator > 0
        assert _find_share_coordinator(cluster, group, topic_id) == coordinator
        cluster.kill(leader)
        _until(
            lambda: _leaders(cluster, topic).get(0, -1) not in (-1, leader),
            "a new leader for the partition",
        )
        survivors = [n for n in (1, 2, 3) if n != leader]
        consumer = _consumer(_bootstrap(cluster, survivors), group, topic)
        rest: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(first) + len(rest) < len(values) and time.monotonic() < deadline:
            _take(consumer, rest)
        rest = [v for v in rest if v != "warm-up"]
        print(f"accepted before the kill {len(first)}, after {len(rest)}")
        assert not set(first) & set(rest), "an accepted record was delivered again"
        assert sorted(first + rest) == sorted(values)  # each exactly once
        assert [m for m in consumer.poll(1.0) if m.error() is None] == []
        consumer.close()

        # The killed node comes back; then the share coordinator's node is killed.
        cluster.start_node(leader)
        cluster.wait_for_brokers(3, timeout=30)
        _until(lambda: _coordinator(cluster, group, topic_id) > 0, "a share coordinator")
        coordinator = _coordinator(cluster, group, topic_id)
        print(f"killing the share coordinator {coordinator}")
        cluster.kill(coordinator)
        _until(
            lambda: (
                _coordinator(cluster, group, topic_id) not in (-1, coordinator)
                and _leaders(cluster, topic).get(0, -1) not in (-1, coordinator)
            ),
            "a new share coordinator and partition leader",
        )
        survivors = [n for n in (1, 2, 3) if n != coordinator]
        producer = Producer({"bootstrap.servers": _bootstrap(cluster, survivors), "acks": "all"})
        more = [f"s{i}" for i in range(20)]
        for value in more:
            producer.produce(topic, value.encode())
        producer.flush(15)
        consumer = _consumer(_bootstrap(cluster, survivors), group, topic)
        last: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(last) < len(more) and time.monotonic() < deadline:
            _take(consumer, last)
        print(f"accepted after the coordinator's kill: {len(last)}")
        assert sorted(last) == sorted(more)  # the 100 accepted before never come back
        consumer.close()

        # The group's offsets, through the share coordinators from any node: all accepted
        # (lag 0); reset to the earliest, every record is delivered again.
        bootstrap = _bootstrap(cluster, survivors)
        rows = _groups_cli("describe", group, "-b", bootstrap)
        [row] = [r for r in rows if r[:3] == [group, topic, "0"]]
        start, lag = int(row[3]), int(row[4])
        assert start >= len(values) + len(more) and lag == 0, row
        _groups_cli(
            "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute", "-b", bootstrap
        )
        rows = _groups_cli("describe", group, "-b", bootstrap)
        assert [group, topic, "0", "0", str(start)] in rows
        consumer = _consumer(bootstrap, group, topic)
        again: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(again) < start and time.monotonic() < deadline:
            _take(consumer, again)
        assert len(again) == start and set(values + more) <= set(again)
    finally:
        consumer.close()


def _groups_cli(*argv: str) -> list[list[str]]:
    """``pydmq groups ...`` in a process of its own: the rows it printed, split."""
    done = subprocess.run(
        [sys.executable, "-m", "pydmq", "groups", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return [line.split() for line in done.stdout.splitlines()]


def _set_group_config(
    cluster: ClusterProcess, node_id: int, group: str, name: str, value: str
) -> None:
    """IncrementalAlterConfigs SET on GROUP resource ``group`` (type 32), through ``node_id``."""
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=32,
                resource_name=group,
                configs=[AlterableConfig(name=name, config_operation=0, value=value)],
            )
        ]
    )
    with RawClient(cluster.node(node_id).bootstrap, timeout=30) as raw:
        [answer] = raw.request(44, 1, request).body.responses
    assert answer.error_code == 0, answer


def _bootstrap(cluster: ClusterProcess, nodes: list[int]) -> str:
    return ",".join(cluster.node(n).bootstrap for n in nodes)


def test_a_group_config_reaches_the_partition_leader(cluster: ClusterProcess) -> None:
    """A GROUP config set on any node (IncrementalAlterConfigs, resource type 32) is applied
    by the partition leader, which learns it from the controller's UpdateMetadata:
    ``share.auto.offset.reset=earliest`` makes a new group read records produced before its
    first fetch."""
    bootstrap = cluster.bootstrap
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"e{i}" for i in range(30)]
    for value in values:
        producer.produce(topic, value.encode())
    producer.flush(15)
    leader = _leaders(cluster, topic)[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    _set_group_config(cluster, other, group, "share.auto.offset.reset", "earliest")
    consumer = _consumer(bootstrap, group, topic)
    try:
        got: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(values) and time.monotonic() < deadline:
            _take(consumer, got)
        assert sorted(got) == sorted(values)
    finally:
        consumer.close()


def _java_accepted(lines: list[str]) -> tuple[list[str], list[str]]:
    """Java's ShareGroupConsumer output: the values whose acceptance a commit confirmed
    ("C" after their "R" lines), and every value delivered."""
    accepted: list[str] = []
    delivered: list[str] = []
    batch: list[str] = []
    for line in lines:
        if line.startswith("R "):
            batch.append(line.split()[2])
            delivered.append(line.split()[2])
        elif line == "C":
            accepted += batch
            batch = []
        elif line.startswith("E "):
            batch = []  # unknown outcome: may come back
    return accepted, delivered


def test_java_share_consumer_across_a_leader_kill(
    cluster: ClusterProcess, java_classes: Path
) -> None:
    """Java's KafkaShareConsumer (kafka-clients 4.x) on the cluster: the partition leader is
    killed while it consumes; every record is delivered, the group ends past all of them, and
    none is accepted twice (an acceptance a commit confirmed never comes back)."""
    bootstrap = cluster.bootstrap
    topic, group = f"share-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    _set_group_config(cluster, 1, group, "share.auto.offset.reset", "earliest")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    first = [f"a{i}" for i in range(5000)]
    for value in first:
        producer.produce(topic, value.encode())
    producer.flush(15)
    java = JavaShareMember(java_classes, bootstrap, topic, group)
    try:
        _until(lambda: len(java.values()) >= 200, "Java received records")
        leader = _leaders(cluster, topic)[0]
        cluster.kill(leader)
        _until(
            lambda: _leaders(cluster, topic).get(0, -1) not in (-1, leader),
            "a new leader for the partition",
        )
        survivors = [n for n in (1, 2, 3) if n != leader]
        producer = Producer({"bootstrap.servers": _bootstrap(cluster, survivors), "acks": "all"})
        second = [f"b{i}" for i in range(100)]
        for value in second:
            producer.produce(topic, value.encode())
        producer.flush(15)
        wanted = set(first + second)
        bootstrap = _bootstrap(cluster, survivors)

        def done() -> bool:
            # Every record delivered, and the group past all of them: an acknowledgement
            # whose answer the kill cut off may have been accepted without a "C".
            if not set(_java_accepted(java.lines)[1]) >= wanted:
                return False
            rows = _groups_cli("describe", group, "-b", bootstrap)
            return [group, topic, "0", str(len(wanted)), "0"] in rows

        _until(done, "every record delivered and the group's start offset at the end")
    finally:
        java.stop()
    accepted, delivered = _java_accepted(java.lines)
    print(f"java: {len(delivered)} deliveries, {len(accepted)} confirmed acceptances")
    assert len(accepted) == len(set(accepted)), "a record accepted twice"
    assert set(accepted) <= wanted
