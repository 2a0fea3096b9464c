"""The Java client's transactions (kafka-clients 4.x) against pydmq: the transactional
KafkaProducer (initTransactions, commit, abort, sendOffsetsToTransaction with a consumer
group's metadata, a producer fenced by a newer instance of its transactional id) and a
read_committed KafkaConsumer that sees only committed records, on one node and on a 3-node
cluster.

Driven through compat/java/src/TransactionsClient.java, compiled here with javac against
compat/java/lib (the jars ./scripts/test resolves). confluent-kafka is the independent side
that creates topics, seeds inputs and reads the group's committed offsets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess

from .support import JAVA_DIR, PARTITIONS, unique_topic

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SOURCE = JAVA_DIR / "src" / "TransactionsClient.java"
PLAN = "commit:6,abort:6,commit:5,abort:3"
INPUTS = 30

Row = dict[str, Any]


@pytest.fixture(scope="module")
def java_classes() -> Iterator[Path]:
    if shutil.which("javac") is None or not list((JAVA_DIR / "lib").glob("kafka-clients-*.jar")):
        # Not a skip: a missing toolchain must not turn into a silently green run.
        pytest.fail("javac or compat/java/lib/kafka-clients-*.jar missing (run ./scripts/test)")
    out = Path(tempfile.mkdtemp(prefix="java-txn-"))
    subprocess.run(
        [
            "javac",
            "-nowarn",
            "-encoding",
            "UTF-8",
            "-d",
            str(out),
            "-cp",
            f"{JAVA_DIR}/lib/*",
            str(SOURCE),
        ],
        check=True,
        timeout=120,
    )
    yield out
    shutil.rmtree(out, ignore_errors=True)


def run_txn_client(classes: Path, *args: str, timeout: float = 120.0) -> list[Row]:
    """Run one TransactionsClient command; its JSON lines (raises with stderr on failure)."""
    cmd = [
        "java",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        f"{classes}:{JAVA_DIR / 'lib'}/*",
        "TransactionsClient",
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"TransactionsClient {' '.join(args)} exited {proc.returncode}\n"
            f"--- stderr (tail) ---\n{proc.stderr[-4000:]}\n"
            f"--- stdout (tail) ---\n{proc.stdout[-2000:]}"
        )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def create_topic(bootstrap: str, topic: str, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, replication)])[topic].result(60)


def consume(classes: Path, bootstrap: str, topic: str, isolation: str) -> tuple[list[Row], Row]:
    """(records, end offsets) of ``topic`` read from the beginning at ``isolation``."""
    rows = run_txn_client(
        classes, "consume", "--bootstrap", bootstrap, "--topic", topic, "--isolation", isolation
    )
    return sorted((r for r in rows if "v" in r), key=lambda r: (r["p"], r["o"])), rows[-1]["end"]


def check_commit_and_abort(classes: Path, bootstrap: str, replication: int) -> None:
    topic = unique_topic("java-txn")
    create_topic(bootstrap, topic, replication)
    written = run_txn_client(
        classes,
        "produce",
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--tid",
        f"{topic}-tid",
        "--plan",
        PLAN,
    )
    assert len(written) == 20
    committed = sorted(
        ({"p": r["p"], "o": r["o"], "v": r["v"]} for r in written if r["outcome"] == "commit"),
        key=lambda r: (r["p"], r["o"]),
    )
    everything = sorted(
        ({"p": r["p"], "o": r["o"], "v": r["v"]} for r in written), key=lambda r: (r["p"], r["o"])
    )
    # every transaction ends with a marker, which takes an offset on each partition it wrote
    log_end = {str(p): 4 + sum(1 for r in written if r["p"] == p) for p in range(PARTITIONS)}

    seen, end = consume(classes, bootstrap, topic, "read_committed")
    assert seen == committed
    assert end == log_end  # nothing open: the last stable offset is the log end
    seen, end = consume(classes, bootstrap, topic, "read_uncommitted")
    assert seen == everything
    assert end == log_end


def check_fenced(classes: Path, bootstrap: str, replication: int) -> None:
    topic = unique_topic("java-fence")
    create_topic(bootstrap, topic, replication)
    tid = f"{topic}-tid"
    rows = run_txn_client(
        classes, "fence", "--bootstrap", bootstrap, "--topic", topic, "--tid", tid
    )
    assert rows[0] == {"fenced": "ProducerFencedException"}
    new = rows[1]["new"]
    seen, _ = consume(classes, bootstrap, topic, "read_committed")
    assert seen == [{"p": 0, "o": new["o"], "v": f"{tid}/new"}]
    # the fenced producer's flushed record is in the log, aborted by the coordinator
    seen, _ = consume(classes, bootstrap, topic, "read_uncommitted")
    assert [r["v"] for r in seen] == [f"{tid}/old", f"{tid}/new"]


def check_send_offsets(classes: Path, bootstrap: str, replication: int) -> None:
    prefix = unique_topic("java-eos")
    source, sink, group = f"{prefix}-in", f"{prefix}-out", f"{prefix}-group"
    for topic in (source, sink):
        create_topic(bootstrap, topic, replication)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(INPUTS):
        producer.produce(source, f"in-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0

    [summary] = run_txn_client(
        classes,
        "copy",
        "--bootstrap",
        bootstrap,
        "--input",
        source,
        "--output",
        sink,
        "--group",
        group,
        "--tid",
        f"{prefix}-tid",
        "--count",
        str(INPUTS),
        "--abort-first",
        "true",
        timeout=180,
    )
    assert summary["aborted"] == 1 and summary["inputs"] == INPUTS, summary

    # exactly one committed copy of every input; the aborted first batch only read_uncommitted
    seen, _ = consume(classes, bootstrap, sink, "read_committed")
    assert sorted(r["v"] for r in seen) == sorted(f"copy/in-{i}" for i in range(INPUTS))
    everything, _ = consume(classes, bootstrap, sink, "read_uncommitted")
    assert len(everything) > INPUTS

    # the group's offsets were committed by the transactions: the end of every input partition
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        committed = consumer.committed(
            [confluent_kafka.TopicPartition(source, p) for p in range(PARTITIONS)], timeout=30
        )
    finally:
        consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == {
        p: INPUTS // PARTITIONS for p in range(PARTITIONS)
    }


CHECKS = [check_commit_and_abort, check_fenced, check_send_offsets]


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__.removeprefix("check_") for c in CHECKS])
def test_single_node(broker: Any, java_classes: Path, check: Any) -> None:
    check(java_classes, broker.bootstrap, 1)


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-java-txn-cluster-"))
    props = {
        **FAST_FAILOVER,
        "num.partitions": PARTITIONS,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 3,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    }
    nodes = ClusterProcess(3, root / "cluster", props)
    try:
        nodes.start()
        nodes.wait_for_brokers(3, timeout=60)
        yield nodes
    finally:
        nodes.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__.removeprefix("check_") for c in CHECKS])
def test_three_node_cluster(cluster: ClusterProcess, java_classes: Path, check: Any) -> None:
    check(java_classes, cluster.bootstrap, 3)
