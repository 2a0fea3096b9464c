"""A 3-node cluster whose partition leader's disk starts failing with EIO: leadership moves.

Every node starts with ``PYDMQ_FAILPOINTS_FILE`` naming one file (absent: nothing armed). An
idempotent acks=all confluent-kafka producer streams numbered records into one partition
(RF=3, min.insync.replicas=2). The test then writes ``segment.append.write=eio`` into the
file and sends SIGUSR2 to the leader only, which re-reads it: its next segment write fails,
the log dir goes offline, produces are answered KAFKA_STORAGE_ERROR and the broker heartbeats
``want_fence``, so the controller fences it and elects another ISR member. The producer
follows the new leader; afterwards every acknowledged record is read back exactly once, in
order, at the offset its delivery report gave, and the failed broker is out of the ISR.

On af52f34 there is no such failpoint and an I/O error on a leader's write only closed the
producer's connection: the broker stayed leader of a log it could not write.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.client import KafkaClient
from pydmq.failpoints import FILE_ENV_VAR
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TOPIC = "eio"
BEFORE_FAULT = 3000
AFTER_FAULT = 3000


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ClusterProcess, Path]]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-eio-"))
    spec_file = root / "failpoints"
    monkeypatch.setenv(FILE_ENV_VAR, str(spec_file))  # inherited by every node process
    c = ClusterProcess(3, root / "cluster", FAST_FAILOVER)
    c.start()
    try:
        c.wait_for_brokers(3, timeout=30)
        yield c, spec_file
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


def _partition(cluster: ClusterProcess) -> tuple[int, list[int]]:
    """(leader, ISR) of partition 0 as a running node reports it."""
    bootstraps = [cluster.node(i).bootstrap for i in cluster.running()]
    with KafkaClient(bootstraps, timeout=3.0) as client:
        for t in client.refresh_metadata([TOPIC]).topics:
            for p in t.partitions:
                if t.name == TOPIC and p.partition_index == 0:
                    return p.leader_id, list(p.isr_nodes)
    return -1, []


def _produce(producer: object, acked: dict[int, int], failed: list[str], first: int, n: int) -> int:
    def report(err: object, msg: object) -> None:
        if err is None:
            acked[int(msg.value())] = msg.offset()  # type: ignore[attr-defined]
        else:
            failed.append(str(err))

    for i in range(first, first + n):
        while True:
            try:
                producer.produce(TOPIC, b"%d" % i, callback=report)  # type: ignore[attr-defined]
                break
            except BufferError:
                producer.poll(0.05)  # type: ignore[attr-defined]
        producer.poll(0)  # type: ignore[attr-defined]
    return first + n


def test_eio_on_the_leader_moves_leadership_and_loses_nothing(
    cluster: tuple[ClusterProcess, Path],
) -> None:
    c, spec_file = cluster
    admin = confluent_admin.AdminClient({"bootstrap.servers": c.bootstrap})
    new_topic = confluent_admin.NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic], request_timeout=15)[TOPIC].result(20)
    c.wait_for("a full ISR", lambda: len(_partition(c)[1]) == 3, timeout=30)

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": c.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )
    acked: dict[int, int] = {}
    failed: list[str] = []
    sent = _produce(producer, acked, failed, 0, BEFORE_FAULT)
    assert producer.flush(30) == 0
    leader, isr = _partition(c)
    assert leader >= 0 and len(isr) == 3

    spec_file.write_text("segment.append.write=eio\n")
    os.kill(c.node(leader).pid, signal.SIGUSR2)  # only the leader re-reads the file
    injected = time.monotonic()
    sent = _produce(producer, acked, failed, sent, AFTER_FAULT)
    c.wait_for(
        "leadership moved off the failed broker",
        lambda: _partition(c)[0] not in (-1, leader),
        timeout=30,
    )
    moved_after = time.monotonic() - injected
    assert producer.flush(60) == 0, "records still undelivered"
    assert failed == []
    assert len(acked) == sent

    new_leader, new_isr = _partition(c)
    assert leader not in new_isr, "the failed broker is still in the ISR"
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": c.node(new_leader).bootstrap, "group.id": "unused"}
    )
    records: list[tuple[int, int]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while len(records) < sent and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                records.append((msg.offset(), int(msg.value())))
    finally:
        consumer.close()
    assert [o for o, _ in records] == list(range(len(records)))
    assert [n for _, n in records] == list(range(sent)), "lost, duplicated or reordered"
    assert all(records[o][1] == n for n, o in acked.items())
    log_text = c.node(leader).log_path.read_text(errors="replace")
    assert "failpoint segment.append.write" in log_text
    print(
        f"\nleader {leader} failed after {BEFORE_FAULT} records; new leader {new_leader} "
        f"(ISR {new_isr}) within {moved_after:.1f} s; {sent} records acknowledged and read back"
    )
