"""Spark's Kafka source and sink against a 3-node pydmq cluster of real processes.

The single-node counterpart is test_spark.py (same connector jars and SparkSession, see
spark_support.py). Here every topic has RF=3 and min.insync.replicas=2, Spark is given all
three nodes as ``kafka.bootstrap.servers`` and has to follow partition leadership through
Metadata: its AdminClient asks each partition's leader for offsets (ListOffsets), its
consumers fetch from the leaders and its producer writes to them with ``acks=all``.

* a batch write (keys, headers, explicit partitions) read back as a batch, by
  earliest/latest and by per-partition JSON offsets, through all nodes and through one;
* a checkpointed stream into a Parquet file sink, stopped mid-stream and resumed, with
  ``maxOffsetsPerTrigger``;
* batch reads by ``subscribePattern``, ``assign``, per-partition
  ``startingOffsetsByTimestamp`` (ListOffsets by timestamp, answered by each partition's
  leader: the leaders are on three different nodes) and ``minPartitions``, bootstrapped
  through one node that does not lead the partitions read;
* a stream that keeps running while the leader of a source partition is ``kill -9``ed,
  records keep arriving (confluent-kafka, acks=all, idempotent) and the node restarts;
* ``failOnDataLoss`` after a DeleteRecords sent to the partitions' leaders: every replica's
  log start follows, the new leader of a killed one answers it as earliest, a lenient query
  continues from it, a strict one fails.

Records follow support.py's deterministic stream (index i: partition i % 3, key, value,
two headers, CreateTime base_ts + i), so a fresh topic holds index p + 3 * offset at
``offset`` of partition p and every byte Spark returns is checked (Spark's sink cannot set
a record timestamp: those of the batch write are the producer's, checked to be CreateTime
during the write). The file sink with a checkpoint is exactly-once, so the sink must hold
every produced record exactly once: same count, same set, contiguous offsets. The node
logs of the last run are kept in build/cluster-logs/test_spark_cluster/.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pydmq.engines.segment.loader import LOG_START_OFFSET_CHECKPOINT
from pydmq.storage.checkpoint import read_offset_checkpoint
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess

from . import spark_support as ss
from .support import (
    PARTITIONS,
    REPO_ROOT,
    Rec,
    check_record,
    headers,
    index_at,
    key,
    new_base_ts,
    partition_of,
    timestamp,
    unique_topic,
    value,
)

pyspark = pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402
from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

NODE_CONFIG = FAST_FAILOVER  # a killed leader is replaced within a couple of seconds
LOG_DIR = REPO_ROOT / "build" / "cluster-logs" / "test_spark_cluster"
STREAM_TIMEOUT = 90.0  # seconds for a running stream to reach the expected offsets

PartitionState = dict[int, tuple[int, list[int], list[int]]]  # p -> (leader, replicas, isr)
# A manual assignment whose preferred leaders are spread: node p + 1 leads partition p.
SPREAD = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
SPREAD_LEADERS = {p: replicas[0] for p, replicas in enumerate(SPREAD)}


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-spark-cluster-"))
    c = ClusterProcess(3, root, NODE_CONFIG)
    c.start()
    try:
        c.wait_for_brokers(3, timeout=30)
        yield c
    finally:
        c.stop()
        c.copy_logs(LOG_DIR)
        if getattr(request.module, "_pydmq_failed", False):
            sys.stderr.write(f"\n--- node logs (full copies in {LOG_DIR}) ---\n")
            sys.stderr.write(c.log_tails(4000) + "\n")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def admin(cluster: ClusterProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


@pytest.fixture(scope="module")
def spark(cluster: ClusterProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Depends on the cluster so that Spark (and its cached producers) stops before it does.
    session = ss.spark_session(tmp_path_factory.mktemp("spark-cluster"))
    try:
        jars = ss.kafka_jar_versions()
        print(
            f"\n[versions] Spark {session.version} (pyspark {pyspark.__version__}), "
            f"spark-sql-kafka-0-10 {jars.get('spark-sql-kafka-0-10_2.13')}, "
            f"kafka-clients {jars.get('kafka-clients')}; "
            f"confluent-kafka {importlib.metadata.version('confluent-kafka')} "
            f"(librdkafka {confluent_kafka.libversion()[0]})"
        )
        yield session
    finally:
        ss.stop_spark(session)


# -- cluster helpers (confluent-kafka's AdminClient: independent of Spark and of pydmq) -----


def partition_state(admin: AdminClient, topic: str) -> tuple[int, PartitionState]:
    """(active controller id, {partition: (leader, replicas, isr)}) from a fresh Metadata."""
    md = admin.list_topics(topic=topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return md.controller_id, {}
    return md.controller_id, {
        p: (pm.leader, sorted(pm.replicas), sorted(pm.isrs)) for p, pm in t.partitions.items()
    }


def wait_full_isr(cluster: ClusterProcess, admin: AdminClient, topic: str, timeout: float) -> None:
    last: list[object] = []

    def full() -> bool:
        _, parts = partition_state(admin, topic)
        last[:] = [parts]
        return len(parts) == PARTITIONS and all(
            leader in cluster.nodes and replicas == [1, 2, 3] and isr == [1, 2, 3]
            for leader, replicas, isr in parts.values()
        )

    try:
        cluster.wait_for(f"{topic}: leaders and a full ISR", full, timeout=timeout)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last metadata {last}") from None


def create_rf3_topic(cluster: ClusterProcess, admin: AdminClient, topic: str) -> None:
    create_rf3_topics(cluster, admin, [topic])


def create_rf3_topics(
    cluster: ClusterProcess, admin: AdminClient, topics: list[str], *, spread: bool = False
) -> None:
    """RF=3 topics of 3 partitions (min.insync.replicas=2), created in one request; with
    ``spread``, assigned by :data:`SPREAD` and waited for until node p + 1 leads partition p."""
    config = {"min.insync.replicas": "2"}
    new = [
        NewTopic(t, PARTITIONS, replica_assignment=SPREAD, config=config)
        if spread
        else NewTopic(t, PARTITIONS, 3, config=config)
        for t in topics
    ]
    futures = admin.create_topics(new, request_timeout=15)
    for t in topics:
        futures[t].result(20)
    for t in topics:
        wait_full_isr(cluster, admin, t, timeout=30)
        if spread:
            wait_leaders(cluster, admin, t, SPREAD_LEADERS, timeout=10)


def wait_leaders(
    cluster: ClusterProcess, admin: AdminClient, topic: str, leaders: dict[int, int], timeout: float
) -> None:
    last: list[object] = []

    def led() -> bool:
        _, parts = partition_state(admin, topic)
        last[:] = [parts]
        return {p: s[0] for p, s in parts.items()} == leaders

    try:
        cluster.wait_for(f"{topic}: leaders {leaders}", led, timeout=timeout)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; last metadata {last}") from None


EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps


def list_offsets(admin: AdminClient, topic: str, at: int) -> dict[int, int]:
    """ListOffsets of every partition at ``at`` (EARLIEST, LATEST or a timestamp);
    librdkafka asks each partition's leader."""
    make: Any = OffsetSpec  # OffsetSpec(-2 | -1 | ts): its earliest, latest or a timestamp
    spec = make(at)
    futures = admin.list_offsets(
        {TopicPartition(topic, p): spec for p in range(PARTITIONS)}, request_timeout=5
    )
    return {tp.partition: f.result(10).offset for tp, f in futures.items()}


def replica_log_starts(cluster: ClusterProcess, topic: str, partition: int) -> dict[int, int]:
    """Each node's log start offset of its replica of ``topic``-``partition``, as the segment
    engine persists it on every change (``_log-start-offset.checkpoint``; absent: 0)."""
    out: dict[int, int] = {}
    for node_id, node in sorted(cluster.nodes.items()):
        path = node.data_dir / f"{topic}-{partition}" / LOG_START_OFFSET_CHECKPOINT
        found = read_offset_checkpoint(str(path))
        out[node_id] = 0 if found is None else found
    return out


class AckedProducer:
    """confluent-kafka with acks=all and idempotence writing support.py's records; keeps
    every delivery report (index -> (partition, offset)) and every failure."""

    def __init__(self, bootstrap: str, topic: str, base_ts: int) -> None:
        self.topic = topic
        self.base_ts = base_ts
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.lock = threading.Lock()
        self.acked: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}

    def _report(self, err: Any, msg: Any) -> None:
        i = int(msg.key()[4:])  # b"key-<i>"
        with self.lock:
            if err is not None:
                self.failed[i] = str(err)
            else:
                self.acked[i] = (msg.partition(), msg.offset())

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def send(self, i: int) -> None:
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    key=key(i),
                    value=value(i),
                    partition=partition_of(i),
                    timestamp=timestamp(self.base_ts, i),
                    headers=headers(i),
                    on_delivery=self._report,
                )
                break
            except BufferError:
                self.producer.poll(0.05)
        self.producer.poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        left = self.producer.flush(timeout)
        assert left == 0, f"{left} records not delivered in {timeout} s"
        assert not self.failed, f"delivery failures: {list(self.failed.items())[:5]}"

    def check_offsets(self, indices: range) -> None:
        """Idempotence keeps each partition in produce order: index i at offset i // 3."""
        with self.lock:
            wrong = {
                i: self.acked.get(i)
                for i in indices
                if self.acked.get(i) != (partition_of(i), i // PARTITIONS)
            }
        assert not wrong, f"{len(wrong)} delivery reports off, e.g. {list(wrong.items())[:5]}"


class PacedProducer(threading.Thread):
    """Sends ``indices`` at about ``rate`` records/s in the background, then flushes."""

    def __init__(self, producer: AckedProducer, indices: range, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = producer
        self.indices = indices
        self.rate = rate
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            start = time.monotonic()
            for n, i in enumerate(self.indices):
                self.producer.send(i)
                pause = start + n / self.rate - time.monotonic()
                if pause > 0:
                    self.producer.producer.poll(pause)
            self.producer.flush(90)
        except BaseException as exc:  # reported by the test thread
            self.error = exc


def wait_acked(producer: AckedProducer, target: int, timeout: float) -> float:
    """Seconds until ``target`` records are acknowledged in all."""
    start = time.monotonic()
    while producer.acked_count() < target:
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"only {producer.acked_count()} of {target} acks in {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - start


# -- Spark helpers ---------------------------------------------------------------------


def read_batch(spark: Any, bootstrap: str, topic: str, **options: str) -> list[tuple[Rec, int]]:
    """A batch read with includeHeaders: (record, timestampType) sorted by position."""
    r = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
    )
    for k, v in options.items():
        r = r.option(k, v)
    rows = r.load().selectExpr(*ss.REC_COLUMNS, "timestampType").collect()
    assert {row["topic"] for row in rows} <= {topic}
    out = [(ss.row_to_rec(row), row["timestampType"]) for row in rows]
    return sorted(out, key=lambda rt: (rt[0].partition, rt[0].offset))


def stream_writer(
    spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> Any:
    """A Kafka source (from earliest, headers included) into a Parquet file sink."""
    r = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    for k, v in options.items():
        r = r.option(k, v)
    return (
        r.load()
        .selectExpr(*ss.REC_COLUMNS)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
    )


def start_stream(
    spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> Any:
    """:func:`stream_writer` started with one micro-batch a second."""
    writer = stream_writer(spark, bootstrap, topic, out, checkpoint, **options)
    return writer.trigger(processingTime="1 second").start()


def start_available_now(
    spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> Any:
    """:func:`stream_writer` started for what is there now (the query then stops)."""
    writer = stream_writer(spark, bootstrap, topic, out, checkpoint, **options)
    return writer.trigger(availableNow=True).start()


def run_to_end(query: Any) -> None:
    """Until an ``available_now`` query finishes (StreamingQueryException if it failed)."""
    try:
        assert query.awaitTermination(STREAM_TIMEOUT), "availableNow run did not finish"
    finally:
        query.stop()


def progress_ends(progress: Any, topic: str) -> dict[int, int]:
    """The end offsets of one progress report (its micro-batch is committed)."""
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        end = json.loads(end)
    return {int(p): int(o) for p, o in (end or {}).get(topic, {}).items()}


def wait_stream(
    query: Any, topic: str, done: Callable[[dict[int, int]], bool], timeout: float
) -> dict[int, int]:
    """Until the last committed micro-batch's end offsets satisfy ``done``; fails at once
    when the query dies."""
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    while True:
        exc = query.exception()
        if exc is not None:
            raise AssertionError(f"streaming query failed: {exc}")
        assert query.isActive, "streaming query stopped"
        last = query.lastProgress
        if last is not None:
            ends = progress_ends(last, topic)
            if done(ends):
                return ends
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream at {ends} after {timeout} s; status {query.status}")
        time.sleep(0.2)


def batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def sink_recs(spark: Any, out: Path, topic: str) -> list[Rec]:
    """What the file sink committed (Spark reads only files listed in _spark_metadata)."""
    rows = spark.read.parquet(str(out)).collect()
    assert {r["topic"] for r in rows} <= {topic}
    return sorted((ss.row_to_rec(r) for r in rows), key=lambda r: (r.partition, r.offset))


def positions(recs: list[Rec]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in recs]


def expect(ends: dict[int, int]) -> list[tuple[int, int]]:
    return [(p, o) for p in sorted(ends) for o in range(ends[p])]


def check_ranges(recs: list[Rec], ranges: Mapping[int, Iterable[int]], base_ts: int) -> None:
    """``recs`` (sorted) are exactly offsets ``ranges[p]`` of each partition p of a fresh
    topic of support.py's records, byte for byte."""
    assert positions(recs) == [(p, o) for p in sorted(ranges) for o in ranges[p]]
    for r in recs:
        check_record(r, index_at(r.partition, r.offset), base_ts)


def by_topic(rows: list[Any]) -> dict[str, list[Rec]]:
    """Kafka source rows (``ss.REC_COLUMNS``) as sorted records per topic."""
    out: dict[str, list[Rec]] = {}
    for row in rows:
        out.setdefault(row["topic"], []).append(ss.row_to_rec(row))
    for recs in out.values():
        recs.sort(key=lambda r: (r.partition, r.offset))
    return out


def check_exactly(recs: list[Rec], produced: set[int], base_ts: int) -> None:
    """``recs`` are exactly the records of indices ``produced``: each once, at contiguous
    offsets from 0 in every partition, byte for byte."""
    got = [index_at(r.partition, r.offset) for r in recs]
    assert len(recs) == len(produced), f"{len(recs)} records, {len(produced)} produced"
    assert set(got) == produced, (
        f"missing {sorted(produced - set(got))[:10]}, extra {sorted(set(got) - produced)[:10]}"
    )
    ends = {p: sum(1 for i in produced if partition_of(i) == p) for p in range(PARTITIONS)}
    assert positions(recs) == expect(ends), "duplicate or non-contiguous offsets"
    for r in recs:
        check_record(r, index_at(r.partition, r.offset), base_ts)


# -- batch sink and source -------------------------------------------------------------


def test_batch_write_acks_all_then_batch_read_by_offsets_with_headers(
    spark: Any, cluster: ClusterProcess, admin: AdminClient
) -> None:
    topic = unique_topic("spark-cluster-batch")
    create_rf3_topic(cluster, admin, topic)
    per_partition = 30
    count = per_partition * PARTITIONS
    header_type = ArrayType(
        StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    )
    schema = StructType(
        [
            StructField("partition", IntegerType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("headers", header_type),
        ]
    )
    rows = [(partition_of(i), key(i), value(i), headers(i)) for i in range(count)]
    # One Spark partition: the sink then writes each Kafka partition in index order.
    df = spark.createDataFrame(rows, schema).coalesce(1)
    before = int(time.time() * 1000)
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("kafka.acks", "all")
        .option("topic", topic)
        .save()
    )
    after = int(time.time() * 1000)

    def check(recs: list[tuple[Rec, int]], ranges: dict[int, range]) -> None:
        assert [(r.partition, r.offset) for r, _ in recs] == [
            (p, o) for p in sorted(ranges) for o in ranges[p]
        ]
        for r, ts_type in recs:
            i = index_at(r.partition, r.offset)
            assert (r.key, r.value, r.headers) == (key(i), value(i), headers(i)), r
            # The sink leaves the timestamp to the producer: CreateTime, during the write.
            assert ts_type == 0 and before - 1000 <= r.timestamp <= after + 1000, r

    # Every partition from earliest to latest: offsets 0..29, contiguous, in index order.
    everything = {p: range(per_partition) for p in range(PARTITIONS)}
    check(
        read_batch(
            spark, cluster.bootstrap, topic, startingOffsets="earliest", endingOffsets="latest"
        ),
        everything,
    )
    # Per-partition JSON offsets (-2 earliest, -1 latest), with only one node as bootstrap
    # (one that does not lead partition 0): Spark finds the other leaders through Metadata.
    _, parts = partition_state(admin, topic)
    node_id = next(i for i in sorted(cluster.nodes) if i != parts[0][0])
    starting = json.dumps({topic: {"0": 3, "1": -2, "2": 11}})
    ending = json.dumps({topic: {"0": 17, "1": 25, "2": -1}})
    recs = read_batch(
        spark,
        cluster.node(node_id).bootstrap,
        topic,
        startingOffsets=starting,
        endingOffsets=ending,
    )
    check(recs, {0: range(3, 17), 1: range(0, 25), 2: range(11, per_partition)})

    # An independent reader (confluent-kafka) sees the same records, and the writes are
    # replicated: every ISR is still full.
    other = sorted(
        ss.consume_all(cluster.bootstrap, topic, count), key=lambda r: (r.partition, r.offset)
    )
    assert positions(other) == expect({p: per_partition for p in range(PARTITIONS)})
    for r in other:
        i = index_at(r.partition, r.offset)
        assert (r.key, r.value, r.headers) == (key(i), value(i), headers(i)), r
    wait_full_isr(cluster, admin, topic, timeout=30)


def test_batch_read_pattern_assign_by_timestamp_min_partitions(
    spark: Any, cluster: ClusterProcess, admin: AdminClient
) -> None:
    """Batch reads of RF=3 topics whose partitions 0, 1, 2 are led by nodes 1, 2, 3, with
    node 1 alone as bootstrap: Spark must find the other leaders through Metadata and ask
    each for its offsets (ListOffsets, by timestamp too) and records."""
    prefix = unique_topic("spark-cluster-multi")
    main, other, outsider = f"{prefix}-a", f"{prefix}-b", f"{prefix}_c"
    create_rf3_topics(cluster, admin, [main, other, outsider], spread=True)
    base_ts = new_base_ts()
    counts = {main: 30, other: 6, outsider: 3}  # 10, 2 and 1 per partition
    for t, n in counts.items():
        producer = AckedProducer(cluster.bootstrap, t, base_ts)
        for i in range(n):
            producer.send(i)
        producer.flush()
        producer.check_offsets(range(n))
    one = cluster.node(1).bootstrap  # leads partition 0 of each topic, nothing else

    def full(t: str) -> dict[int, range]:
        return {p: range(counts[t] // PARTITIONS) for p in range(PARTITIONS)}

    # subscribePattern: the two matching topics, every record, not the third topic.
    got = by_topic(
        ss.kafka_df(spark, one, subscribePattern=f"{prefix}-.*")
        .selectExpr(*ss.REC_COLUMNS)
        .collect()
    )
    assert sorted(got) == [main, other]
    check_ranges(got[main], full(main), base_ts)
    check_ranges(got[other], full(other), base_ts)

    # assign: only partitions that node 1 (the bootstrap) does not lead.
    assign = json.dumps({main: [1, 2], other: [1]})
    got = by_topic(ss.kafka_df(spark, one, assign=assign).selectExpr(*ss.REC_COLUMNS).collect())
    assert sorted(got) == [main, other]
    check_ranges(got[main], {1: range(10), 2: range(10)}, base_ts)
    check_ranges(got[other], {1: range(2)}, base_ts)

    # Per-partition timestamps, each looked up by the partition's own leader (nodes 1, 2, 3):
    # an exact record timestamp, one between two records, one before every record; ending
    # by timestamp is exclusive, and one after every record means latest.
    def ts_at(p: int, offset: int) -> int:
        return timestamp(base_ts, index_at(p, offset))

    starting = json.dumps({main: {"0": ts_at(0, 3), "1": ts_at(1, 4) - 1, "2": base_ts - 1000}})
    ending = json.dumps({main: {"0": ts_at(0, 8), "1": ts_at(1, 9) + 1, "2": ts_at(2, 6)}})
    df = ss.kafka_df(
        spark,
        one,
        subscribe=main,
        startingOffsetsByTimestamp=starting,
        endingOffsetsByTimestamp=ending,
    )
    got = by_topic(df.selectExpr(*ss.REC_COLUMNS).collect())
    check_ranges(got[main], {0: range(3, 8), 1: range(4, 10), 2: range(0, 6)}, base_ts)
    # (the same offsets from librdkafka's ListOffsets, also asked of each leader)
    target = ts_at(1, 4) - 1
    found = list_offsets(admin, main, target)
    assert found == {
        p: next(o for o in range(10) if ts_at(p, o) >= target) for p in range(PARTITIONS)
    }, found

    # minPartitions: 6 Spark partitions for 3 Kafka partitions, each Kafka partition's
    # offsets split in two contiguous halves, every record read once.
    df = ss.kafka_df(spark, one, subscribe=main, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    rows = df.selectExpr(*ss.REC_COLUMNS, "spark_partition_id() AS task").collect()
    check_ranges(by_topic(rows)[main], full(main), base_ts)
    tasks: dict[int, list[tuple[int, int]]] = {}
    for row in rows:
        tasks.setdefault(row["task"], []).append((row["partition"], row["offset"]))
    assert len(tasks) == 6, tasks
    halves = sorted(sorted(spans) for spans in tasks.values())
    assert halves == [
        [(p, o) for o in half] for p in range(PARTITIONS) for half in (range(0, 5), range(5, 10))
    ], halves


# -- structured streaming --------------------------------------------------------------


def test_stream_checkpoint_stop_and_resume_with_max_offsets_per_trigger(
    spark: Any, cluster: ClusterProcess, admin: AdminClient, tmp_path: Path
) -> None:
    topic = unique_topic("spark-cluster-resume")
    create_rf3_topic(cluster, admin, topic)
    base_ts = new_base_ts()
    producer = AckedProducer(cluster.bootstrap, topic, base_ts)
    first, second = range(0, 90), range(90, 150)  # 30, then 50 records per partition
    for i in first:
        producer.send(i)
    producer.flush()
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    limit = 30  # at most 30 records (prorated: 10 per partition here) per micro-batch
    options = {"maxOffsetsPerTrigger": str(limit)}

    # Stopped mid-stream, once a first micro-batch is committed.
    query = start_stream(spark, cluster.bootstrap, topic, out, checkpoint, **options)
    try:
        wait_stream(query, topic, lambda e: sum(e.values()) >= limit, STREAM_TIMEOUT)
    finally:
        query.stop()
    sizes = batch_sizes(query)
    partial = sink_recs(spark, out, topic)
    assert 0 < len(partial) < len(first), "the stop was meant to land mid-stream"
    by_partition = {p: sum(1 for r in partial if r.partition == p) for p in range(PARTITIONS)}
    check_exactly(
        partial, {index_at(p, o) for p, n in by_partition.items() for o in range(n)}, base_ts
    )

    # More records while it is stopped; resumed from the checkpoint until all are in.
    for i in second:
        producer.send(i)
    producer.flush()
    producer.check_offsets(range(second.stop))
    query = start_stream(spark, cluster.bootstrap, topic, out, checkpoint, **options)
    want = {p: second.stop // PARTITIONS for p in range(PARTITIONS)}
    try:
        wait_stream(query, topic, lambda e: e == want, STREAM_TIMEOUT)
    finally:
        query.stop()
    sizes += batch_sizes(query)
    # (a micro-batch cut short by the stop is run again on resume: at least every record)
    assert max(sizes) <= limit and sum(sizes) >= second.stop, sizes
    check_exactly(sink_recs(spark, out, topic), set(range(second.stop)), base_ts)


def test_stream_survives_kill_9_of_a_source_partition_leader(
    spark: Any, cluster: ClusterProcess, admin: AdminClient, tmp_path: Path
) -> None:
    """A running query (1 s trigger, failOnDataLoss=true) while the leader of partition 0 is
    killed with SIGKILL, records keep coming (acks=all, idempotent) and the node restarts:
    the file sink ends with exactly the produced records."""
    topic = unique_topic("spark-cluster-failover")
    create_rf3_topic(cluster, admin, topic)
    base_ts = new_base_ts()
    producer = AckedProducer(cluster.bootstrap, topic, base_ts)
    before, during, after = range(0, 150), range(150, 1050), range(1050, 1200)
    for i in before:
        producer.send(i)
    producer.flush()

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = start_stream(spark, cluster.bootstrap, topic, out, checkpoint, failOnDataLoss="true")
    victim: int | None = None
    try:
        wait_stream(query, topic, lambda e: e == {p: 50 for p in range(PARTITIONS)}, STREAM_TIMEOUT)
        paced = PacedProducer(producer, during, rate=150)
        paced.start()
        try:
            wait_acked(producer, before.stop + 200, timeout=30)
            controller, parts = partition_state(admin, topic)
            victim = parts[0][0]
            assert victim in cluster.nodes, parts
            acked_at_kill = producer.acked_count()
            cluster.kill(victim, signal.SIGKILL)
            outage = wait_acked(producer, acked_at_kill + 150, timeout=60)
            _, parts = partition_state(admin, topic)
            assert parts[0][0] in cluster.nodes and parts[0][0] != victim, parts
            cluster.start_node(victim)
            wait_full_isr(cluster, admin, topic, timeout=45)
        finally:
            paced.join(120)
        assert not paced.is_alive(), "paced producer did not finish"
        if paced.error is not None:
            raise paced.error
        for i in after:
            producer.send(i)
        producer.flush()
        producer.check_offsets(range(after.stop))
        want = {p: after.stop // PARTITIONS for p in range(PARTITIONS)}
        wait_stream(query, topic, lambda e: e == want, STREAM_TIMEOUT)
    finally:
        query.stop()
        if victim is not None and not cluster.node(victim).running:
            cluster.start_node(victim)  # (after a failure: for whatever runs next)
    print(
        f"\n[failover] killed node {victim} (leader of partition 0; controller was "
        f"{controller}); 150 more acks {outage:.2f} s after the kill; "
        f"{len(batch_sizes(query))} micro-batches with data"
    )
    check_exactly(sink_recs(spark, out, topic), set(range(after.stop)), base_ts)


def test_stream_fail_on_data_loss_after_delete_records_and_failover(
    spark: Any, cluster: ClusterProcess, admin: AdminClient, tmp_path: Path
) -> None:
    """DeleteRecords past the committed position, sent to the partitions' leaders (nodes 1,
    2, 3): every follower takes the new log start, the leader of partition 0 is killed and
    its successor answers that log start as earliest; failOnDataLoss=false then continues
    from the new log start, failOnDataLoss=true fails the query."""
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        phases[name] = now - clock
        clock = now

    topic = unique_topic("spark-cluster-loss")
    create_rf3_topics(cluster, admin, [topic], spread=True)
    base_ts = new_base_ts()
    producer = AckedProducer(cluster.bootstrap, topic, base_ts)
    for i in range(0, 30):  # offsets 0..9 per partition
        producer.send(i)
    producer.flush()
    dirs = {name: (tmp_path / f"{name}-out", tmp_path / f"{name}-cp") for name in ("l", "s")}
    modes = {"l": "false", "s": "true"}

    def start(name: str) -> Any:
        return start_available_now(
            spark, cluster.bootstrap, topic, *dirs[name], failOnDataLoss=modes[name]
        )

    queries = [start("l"), start("s")]  # both commit offsets 0..9, side by side
    for q in queries:
        run_to_end(q)
    phase("first runs")
    for name in dirs:
        check_ranges(
            sink_recs(spark, dirs[name][0], topic),
            {p: range(10) for p in range(PARTITIONS)},
            base_ts,
        )

    for i in range(30, 60):  # offsets 10..19 per partition
        producer.send(i)
    producer.flush()
    producer.check_offsets(range(60))
    low = ss.delete_records(cluster.bootstrap, topic, {p: 15 for p in range(PARTITIONS)})
    assert low == {p: 15 for p in range(PARTITIONS)}
    # The answer comes once every live replica has the new log start (Kafka's
    # DelayedDeleteRecords), so the replicas' checkpoints show it right away.
    deleted_at = time.monotonic()
    cluster.wait_for(
        "every replica's log start at 15",
        lambda: all(
            replica_log_starts(cluster, topic, p) == {1: 15, 2: 15, 3: 15}
            for p in range(PARTITIONS)
        ),
        timeout=2,
        interval=0.05,
    )
    follow_s = time.monotonic() - deleted_at
    phase("delete")

    victim = SPREAD_LEADERS[0]
    cluster.kill(victim, signal.SIGKILL)
    try:
        last: list[object] = []

        def failed_over() -> bool:
            _, parts = partition_state(admin, topic)
            earliest = list_offsets(admin, topic, EARLIEST)
            latest = list_offsets(admin, topic, LATEST)
            last[:] = [parts, earliest, latest]
            return (
                parts[0][0] not in (victim, -1)
                and earliest == {p: 15 for p in range(PARTITIONS)}
                and latest == {p: 20 for p in range(PARTITIONS)}
            )

        try:
            cluster.wait_for("a new leader answering earliest 15", failed_over, timeout=20)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; last (metadata, earliest, latest) {last}") from None
    finally:
        cluster.start_node(victim)
    phase("failover")

    strict, lenient = start("s"), start("l")  # side by side again
    try:
        with pytest.raises(StreamingQueryException) as info:
            run_to_end(strict)
    finally:
        run_to_end(lenient)
    msg = str(info.value)
    assert "KAFKA_DATA_LOSS" in msg or "data may have been lost" in msg.lower(), msg[:2000]
    # Lenient: nothing below the new log start, nothing skipped above it.
    check_ranges(
        sink_recs(spark, dirs["l"][0], topic),
        {p: [*range(0, 10), *range(15, 20)] for p in range(PARTITIONS)},
        base_ts,
    )
    # Strict: nothing past the loss reached the sink.
    check_ranges(
        sink_recs(spark, dirs["s"][0], topic), {p: range(10) for p in range(PARTITIONS)}, base_ts
    )

    phase("second runs")
    # The restarted node is a follower again, with the log start it had persisted.
    wait_full_isr(cluster, admin, topic, timeout=30)
    for p in range(PARTITIONS):
        assert replica_log_starts(cluster, topic, p) == {1: 15, 2: 15, 3: 15}
    assert list_offsets(admin, topic, EARLIEST) == {p: 15 for p in range(PARTITIONS)}
    phase("full ISR")
    print(
        f"\n[delete-records] followers at log start 15 {follow_s:.2f} s after the response; "
        + ", ".join(f"{name} {secs:.1f} s" for name, secs in phases.items())
    )
