"""A follower restarted with a damaged segment truncates before the damage and fetches again.

Three nodes, one partition with replicas [1, 2, 3] (node 1 leads), min.insync.replicas=2.
2,000 records are produced (acks=all, idempotent); follower node 3 is stopped cleanly, 100 bytes
in the middle of one of its segments are zeroed (below its recovery point: only a CRC32C scan
finds them), 500 more records are produced while it is down, and it is started again. It logs
an ERROR naming the file and the offset it truncates to, re-fetches from the leader, rejoins
the ISR, and after a graceful stop every replica holds the same batches; every acknowledged
record is read back.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.client import KafkaClient
from pydmq.protocol.records import iter_batch_headers
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, replica_batches

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

TOPIC = "follower-damage"
FOLLOWER = 3


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-cluster-damage-"))
    c = ClusterProcess(3, root, {**FAST_FAILOVER, "log.segment.bytes": 4096})
    c.start()
    try:
        c.wait_for_brokers(3, timeout=30)
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def _partition(cluster: ClusterProcess) -> tuple[int, list[int]]:
    """(leader, ISR) of the topic's partition 0 from a running node."""
    addresses = [cluster.node(i).bootstrap for i in cluster.running()]
    with KafkaClient(addresses, timeout=3.0) as client:
        for t in client.refresh_metadata([TOPIC]).topics:
            for p in t.partitions:
                if t.name == TOPIC and p.partition_index == 0:
                    return p.leader_id, sorted(p.isr_nodes)
    return -1, []


def _produce(cluster: ClusterProcess, start: int, count: int) -> list[int]:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "batch.num.messages": 20,
        }
    )
    acked: list[int] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(start, start + count):
        producer.produce(TOPIC, value=b"v%05d" % i, partition=0, on_delivery=delivered)
        if i % 100 == 99:
            producer.flush(15)
    assert producer.flush(20) == 0
    return acked


def _read_all(cluster: ClusterProcess, count: int) -> dict[int, bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
    records: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return records


def test_follower_truncates_a_damaged_segment_and_fetches_it_again(
    cluster: ClusterProcess,
) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = confluent_admin.NewTopic(
        TOPIC, 1, replica_assignment=[[1, 2, FOLLOWER]], config={"min.insync.replicas": "2"}
    )
    admin.create_topics([topic], request_timeout=15)[TOPIC].result(20)
    cluster.wait_for("full ISR", lambda: _partition(cluster) == (1, [1, 2, 3]), timeout=30)
    acked = _produce(cluster, 0, 2_000)
    cluster.wait_for("full ISR", lambda: _partition(cluster) == (1, [1, 2, 3]), timeout=30)

    follower = cluster.node(FOLLOWER)
    cluster.stop_node(FOLLOWER)
    files = sorted((follower.data_dir / f"{TOPIC}-0").glob("*.log"))
    assert len(files) >= 4
    victim = files[1]
    data = victim.read_bytes()
    at = len(data) // 2
    headers = list(iter_batch_headers(data))
    first_bad = next(h.base_offset for h in headers if h.position + h.size > at)
    with open(victim, "r+b") as f:
        f.seek(at)
        f.write(b"\x00" * 100)

    acked += _produce(cluster, 2_000, 500)  # the follower has more to fetch than it lost
    cluster.start_node(FOLLOWER)
    cluster.wait_for("follower back in the ISR", lambda: _partition(cluster)[1] == [1, 2, 3], 60)

    log = follower.log_path.read_text(errors="replace")
    errors = [line for line in log.splitlines() if "ERROR" in line and str(victim) in line]
    assert errors and f"truncating the log to offset {first_bad}" in errors[0], errors

    records = _read_all(cluster, len(acked))
    assert sorted(acked) == list(range(2_500))
    assert records == {i: b"v%05d" % i for i in range(2_500)}, "an acknowledged record is lost"

    cluster.stop()
    replicas = {
        node_id: replica_batches(cluster.node(node_id).data_dir, TOPIC, 0) for node_id in (1, 2, 3)
    }
    assert replicas[FOLLOWER] == replicas[1] == replicas[2]
    assert replicas[1][-1][0] + replicas[1][-1][1] + 1 == 2_500
