"""Spark's Kafka source and sink against a pydmq broker process.

PySpark (pinned, local[2]) with the matching ``spark-sql-kafka-0-10`` connector resolved
from Maven Central (compat/spark/pom.xml -> compat/spark/jars/, see spark_support.py). The
connector talks to the broker with the Java kafka-clients: an AdminClient for metadata and
offsets (ListOffsets, also by timestamp), consumers with manual assignment for the data and
a producer for the sink. confluent-kafka is the independent side that writes the source
records and reads back what Spark wrote.

Records follow support.py's deterministic stream (index i: partition i % 3, key, value,
two headers, CreateTime base_ts + i), so a fresh topic holds index p + 3 * offset at
``offset`` of partition p and every byte Spark returns is checked.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import spark_support as ss
from .support import (
    PARTITIONS,
    Rec,
    check_record,
    headers,
    index_at,
    key,
    new_base_ts,
    timestamp,
    unique_topic,
    value,
)

pyspark = pytest.importorskip("pyspark")
from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

pytestmark = pytest.mark.interop

PER_PARTITION = 10  # records per partition in the batch-read topic
QUERY_TIMEOUT = 120.0  # seconds for one availableNow streaming run


@pytest.fixture(scope="module")
def spark(broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Depends on the broker so that Spark (and its cached producers) stops before it does.
    session = ss.spark_session(tmp_path_factory.mktemp("spark"))
    try:
        yield session
    finally:
        ss.stop_spark(session)


@pytest.fixture(scope="module")
def bootstrap(broker) -> str:
    return broker.bootstrap


@pytest.fixture(scope="module")
def filled(bootstrap: str) -> tuple[str, int]:
    """A 3-partition topic with indices 0..29 (10 per partition); (topic, base_ts)."""
    topic = unique_topic("spark-read")
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, topic)
    ss.produce(bootstrap, topic, range(PER_PARTITION * PARTITIONS), base_ts)
    return topic, base_ts


def read_stream(spark: Any, bootstrap: str, **options: str) -> Any:
    return ss.kafka_df(spark, bootstrap, stream=True, **options).selectExpr(*ss.REC_COLUMNS)


def positions(recs: list[Rec]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in recs]


def expect(ranges: dict[int, Iterable[int]]) -> list[tuple[int, int]]:
    return [(p, o) for p in sorted(ranges) for o in ranges[p]]


def check_all(recs: list[Rec], base_ts: int) -> None:
    for r in recs:
        check_record(r, index_at(r.partition, r.offset), base_ts)


def run_available_now(stream_df: Any, out: Path, checkpoint: Path) -> Any:
    """One availableNow run of a stream into a Parquet sink; returns the stopped query."""
    q = (
        stream_df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert q.awaitTermination(QUERY_TIMEOUT), "availableNow run did not finish"
    finally:
        q.stop()
    return q


def parquet_recs(spark: Any, out: Path) -> list[Rec]:
    rows = spark.read.parquet(str(out)).collect()
    return sorted((ss.row_to_rec(r) for r in rows), key=lambda r: (r.partition, r.offset))


# -- batch sink ------------------------------------------------------------------------


def test_batch_write_keys_and_headers(spark: Any, bootstrap: str) -> None:
    topic = unique_topic("spark-write")
    ss.create_topic(bootstrap, topic)
    count = 60
    schema = StructType(
        [
            StructField("partition", IntegerType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField(
                "headers",
                ArrayType(
                    StructType(
                        [StructField("key", StringType()), StructField("value", BinaryType())]
                    )
                ),
            ),
        ]
    )
    rows = [(i % PARTITIONS, key(i), value(i), headers(i)) for i in range(count)]
    # One Spark partition: the sink then writes each Kafka partition in index order.
    df = spark.createDataFrame(rows, schema).coalesce(1)
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("includeHeaders", "true")
        .save()
    )
    recs = sorted(ss.consume_all(bootstrap, topic, count), key=lambda r: (r.partition, r.offset))
    assert positions(recs) == expect({p: range(count // PARTITIONS) for p in range(PARTITIONS)})
    for r in recs:
        i = index_at(r.partition, r.offset)
        assert (r.key, r.value, r.headers) == (key(i), value(i), headers(i)), r

    # The same records come back through Spark's source, headers included.
    back = ss.kafka_df_recs(ss.kafka_df(spark, bootstrap, subscribe=topic))
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in back] == [
        (r.partition, r.offset, r.key, r.value, r.headers) for r in recs
    ]


# -- batch source ----------------------------------------------------------------------


def test_batch_read_earliest_latest(spark: Any, bootstrap: str, filled) -> None:
    topic, base_ts = filled
    df = ss.kafka_df(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", endingOffsets="latest"
    )
    recs = ss.kafka_df_recs(df)
    assert positions(recs) == expect({p: range(PER_PARTITION) for p in range(PARTITIONS)})
    check_all(recs, base_ts)
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {topic}


def test_batch_read_json_offsets(spark: Any, bootstrap: str, filled) -> None:
    topic, base_ts = filled
    starting = json.dumps({topic: {"0": 2, "1": -2, "2": 5}})  # -2 = earliest
    ending = json.dumps({topic: {"0": 7, "1": 4, "2": -1}})  # -1 = latest
    recs = ss.kafka_df_recs(
        ss.kafka_df(
            spark, bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending
        )
    )
    assert positions(recs) == expect({0: range(2, 7), 1: range(0, 4), 2: range(5, PER_PARTITION)})
    check_all(recs, base_ts)


def test_batch_read_by_timestamp(spark: Any, bootstrap: str, filled) -> None:
    topic, base_ts = filled

    def ts_at(p: int, offset: int) -> int:
        return timestamp(base_ts, index_at(p, offset))

    # Per partition: an exact record timestamp, a timestamp between two records (the next
    # record is the first at or after it) and one before every record.
    starting = json.dumps({topic: {"0": ts_at(0, 3), "1": ts_at(1, 4) - 1, "2": base_ts - 1000}})
    ending = json.dumps({topic: {"0": ts_at(0, 8), "1": ts_at(1, 9) + 1, "2": ts_at(2, 6)}})
    recs = ss.kafka_df_recs(
        ss.kafka_df(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsetsByTimestamp=starting,
            endingOffsetsByTimestamp=ending,
        )
    )
    # ending by timestamp is exclusive: the offset of the first record at or after it.
    assert positions(recs) == expect({0: range(3, 8), 1: range(4, 10), 2: range(0, 6)})
    check_all(recs, base_ts)

    # One timestamp for every partition (startingTimestamp), and a timestamp after every
    # record: by default an error, with the "latest" strategy an empty read.
    recs = ss.kafka_df_recs(
        ss.kafka_df(spark, bootstrap, subscribe=topic, startingTimestamp=str(ts_at(2, 7)))
    )
    first = {
        p: next(o for o in range(PER_PARTITION) if ts_at(p, o) >= ts_at(2, 7)) for p in (0, 1, 2)
    }
    assert positions(recs) == expect({p: range(first[p], PER_PARTITION) for p in (0, 1, 2)})
    future = str(ts_at(2, PER_PARTITION) + 60_000)
    with pytest.raises(Exception, match="No offset matched"):
        # (Spark retries offset look-ups; one attempt is enough for a deterministic error)
        ss.kafka_df(
            spark,
            bootstrap,
            subscribe=topic,
            startingTimestamp=future,
            **{"fetchOffset.numRetries": "1"},
        ).count()
    df = ss.kafka_df(
        spark,
        bootstrap,
        subscribe=topic,
        startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0


def test_subscribe_pattern_assign(spark: Any, bootstrap: str, filled) -> None:
    topic, base_ts = filled
    prefix = unique_topic("spark-multi")
    others = [f"{prefix}-a", f"{prefix}-b"]
    for t in others:
        ss.create_topic(bootstrap, t)
        ss.produce(bootstrap, t, range(6), base_ts)

    def per_topic(df: Any) -> dict[str, int]:
        # (counted here rather than with groupBy: no shuffle stage, a few seconds less)
        return dict(Counter(r["topic"] for r in df.select("topic").collect()))

    df = ss.kafka_df(spark, bootstrap, subscribe=",".join([topic, *others]))
    assert per_topic(df) == {topic: PER_PARTITION * PARTITIONS, others[0]: 6, others[1]: 6}

    df = ss.kafka_df(spark, bootstrap, subscribePattern=f"{prefix}-.*")
    assert per_topic(df) == {others[0]: 6, others[1]: 6}
    check_all(ss.kafka_df_recs(df.where(f"topic = '{others[1]}'")), base_ts)

    df = ss.kafka_df(spark, bootstrap, assign=json.dumps({topic: [0, 2], others[0]: [1]}))
    got = sorted((r["topic"], r["partition"]) for r in df.select("topic", "partition").collect())
    assert got == sorted(
        [(topic, 0)] * PER_PARTITION + [(topic, 2)] * PER_PARTITION + [(others[0], 1)] * 2
    )


def test_min_partitions(spark: Any, bootstrap: str, filled) -> None:
    topic, base_ts = filled
    df = ss.kafka_df(spark, bootstrap, subscribe=topic, minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    recs = ss.kafka_df_recs(df)
    # Split offset ranges still read every record exactly once.
    assert positions(recs) == expect({p: range(PER_PARTITION) for p in range(PARTITIONS)})
    check_all(recs, base_ts)


# -- structured streaming --------------------------------------------------------------


def test_stream_checkpoint_restart(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("spark-stream")
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, topic)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    stream = read_stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")

    ss.produce(bootstrap, topic, range(0, 30), base_ts)
    run_available_now(stream, out, checkpoint)
    recs = parquet_recs(spark, out)
    assert positions(recs) == expect({p: range(10) for p in range(PARTITIONS)})

    # Stopped; more records; restarted from the checkpoint: only the new ones are added.
    ss.produce(bootstrap, topic, range(30, 75), base_ts)
    run_available_now(stream, out, checkpoint)
    recs = parquet_recs(spark, out)
    assert positions(recs) == expect({p: range(25) for p in range(PARTITIONS)})
    check_all(recs, base_ts)

    # A restart with nothing new adds nothing.
    run_available_now(stream, out, checkpoint)
    assert len(parquet_recs(spark, out)) == 75


def test_stream_pattern_assign_by_timestamp(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """PITFALLS #10: the streaming source resolves subscribePattern through the Admin API
    on every batch (a topic created between runs is picked up from its earliest offset),
    and assign + startingOffsetsByTimestamp through ListOffsets by timestamp."""
    prefix = unique_topic("spark-pattern")
    first, second = f"{prefix}-a", f"{prefix}-b"
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, first)
    ss.produce(bootstrap, first, range(0, 30), base_ts)

    def sink_recs(out: Path) -> dict[str, list[Rec]]:
        by_topic: dict[str, list[Rec]] = {}
        for r in spark.read.parquet(str(out)).collect():
            by_topic.setdefault(r["topic"], []).append(ss.row_to_rec(r))
        for recs in by_topic.values():
            recs.sort(key=lambda r: (r.partition, r.offset))
            check_all(recs, base_ts)
        return by_topic

    out, checkpoint = tmp_path / "p-out", tmp_path / "p-cp"
    stream = read_stream(
        spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest"
    )
    run_available_now(stream, out, checkpoint)
    assert {t: len(r) for t, r in sink_recs(out).items()} == {first: 30}
    ss.create_topic(bootstrap, second)
    ss.produce(bootstrap, second, range(0, 12), base_ts)
    ss.produce(bootstrap, first, range(30, 36), base_ts)
    run_available_now(stream, out, checkpoint)
    got = sink_recs(out)
    assert positions(got[first]) == expect({p: range(12) for p in range(PARTITIONS)})
    assert positions(got[second]) == expect({p: range(4) for p in range(PARTITIONS)})

    ts = timestamp(base_ts, index_at(1, 4))
    out, checkpoint = tmp_path / "a-out", tmp_path / "a-cp"
    stream = read_stream(
        spark,
        bootstrap,
        assign=json.dumps({first: [1]}),
        startingOffsetsByTimestamp=json.dumps({first: {"1": ts}}),
    )
    run_available_now(stream, out, checkpoint)
    assert positions(sink_recs(out)[first]) == expect({1: range(4, 12)})


def test_stream_max_offsets_per_trigger(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("spark-trigger")
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, topic)
    ss.produce(bootstrap, topic, range(0, 30), base_ts)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    stream = read_stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10"
    )
    q = run_available_now(stream, out, checkpoint)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    # Spark prorates the limit over the partitions by their backlog and rounds down
    # (3 of 10 per partition here): several batches, none above the limit.
    assert len(sizes) >= 3 and max(sizes) <= 10 and sum(sizes) == 30, sizes
    recs = parquet_recs(spark, out)
    assert positions(recs) == expect({p: range(10) for p in range(PARTITIONS)})
    check_all(recs, base_ts)


def test_stream_min_partitions(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("spark-minparts")
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, topic)
    ss.produce(bootstrap, topic, range(0, 30), base_ts)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    stream = read_stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", minPartitions="6"
    )
    run_available_now(stream, out, checkpoint)
    # One batch; each partition's 10 offsets split in two tasks, one Parquet file per task.
    assert len(list(out.glob("part-*.parquet"))) == 6
    recs = parquet_recs(spark, out)
    assert positions(recs) == expect({p: range(10) for p in range(PARTITIONS)})
    check_all(recs, base_ts)


def test_stream_fail_on_data_loss(spark: Any, bootstrap: str, tmp_path: Path) -> None:
    """After DeleteRecords past the committed position: failOnDataLoss=false continues
    from the new log start, failOnDataLoss=true fails the query."""
    topic = unique_topic("spark-loss")
    base_ts = new_base_ts()
    ss.create_topic(bootstrap, topic)
    ss.produce(bootstrap, topic, range(0, 30), base_ts)  # offsets 0..9 per partition
    lenient = read_stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="false"
    )
    strict = read_stream(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true"
    )
    dirs = {name: (tmp_path / f"{name}-out", tmp_path / f"{name}-cp") for name in ("l", "s")}
    run_available_now(lenient, *dirs["l"])
    run_available_now(strict, *dirs["s"])

    ss.produce(bootstrap, topic, range(30, 60), base_ts)  # offsets 10..19 per partition
    low = ss.delete_records(bootstrap, topic, {p: 15 for p in range(PARTITIONS)})
    assert low == {p: 15 for p in range(PARTITIONS)}

    run_available_now(lenient, *dirs["l"])
    recs = parquet_recs(spark, dirs["l"][0])
    assert positions(recs) == expect(
        {p: [*range(0, 10), *range(15, 20)] for p in range(PARTITIONS)}
    )
    check_all(recs, base_ts)

    with pytest.raises(StreamingQueryException) as info:
        run_available_now(strict, *dirs["s"])
    msg = str(info.value)
    assert "KAFKA_DATA_LOSS" in msg or "data may have been lost" in msg.lower(), msg[:2000]
    # Nothing past the loss reached the strict sink.
    assert positions(parquet_recs(spark, dirs["s"][0])) == expect(
        {p: range(10) for p in range(PARTITIONS)}
    )


# -- compacted topic -------------------------------------------------------------------

COMPACT_KEYS = 20
COMPACT_ROUNDS = 300


def produce_updates(bootstrap: str, topic: str) -> tuple[int, dict[bytes, bytes | None]]:
    """Rounds of updates of COMPACT_KEYS keys, each round in another order; key k is last
    updated in round (k + 1) * COMPACT_ROUNDS / COMPACT_KEYS - 1, so the latest values lie
    all along the log, and key 0's last update is a tombstone. Returns (records produced,
    the latest value of every key)."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}  # many batches
    )
    latest: dict[bytes, bytes | None] = {}
    produced = 0
    shuffle = random.Random(42).shuffle
    for update in range(COMPACT_ROUNDS):
        keys = [k for k in range(COMPACT_KEYS) if update < (k + 1) * COMPACT_ROUNDS // COMPACT_KEYS]
        shuffle(keys)
        for k in keys:
            last = k == 0 and update == COMPACT_ROUNDS // COMPACT_KEYS - 1
            latest[b"k%02d" % k] = None if last else b"v%04d-" % update + b"x" * 190
            producer.produce(topic, latest[b"k%02d" % k], b"k%02d" % k)
            produced += 1
        producer.poll(0)
    assert producer.flush(30) == 0
    return produced, latest


def test_batch_read_of_a_compacted_topic(spark: Any, bootstrap: str) -> None:
    """Spark's batch source over a topic the cleaner compacted: the latest value of every key
    (a tombstone as a null value) is the last one read, offsets skip where older values were,
    and failOnDataLoss (on by default) does not take those gaps for lost data."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from .test_compaction import read_from_the_beginning

    topic = unique_topic("spark-compacted")
    config = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": "16384",  # many closed segments for the cleaner
        "min.cleanable.dirty.ratio": "0.1",
        "delete.retention.ms": "3600000",  # the tombstone stays
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    total, latest = produce_updates(bootstrap, topic)

    # The cleaner runs on its own thread (log.cleaner.backoff.ms between idle passes): wait,
    # bounded, until a consumer reading from the beginning sees most old values gone.
    deadline = time.monotonic() + 90
    while True:
        before, _, high = read_from_the_beginning(bootstrap, topic)
        if len(before) * 4 < total or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert len(before) * 4 < total, f"not compacted within 90 s: {len(before)} of {total} read"
    assert high == total

    df = ss.kafka_df(
        spark, bootstrap, subscribe=topic, startingOffsets="earliest", endingOffsets="latest"
    )
    recs = ss.kafka_df_recs(df)
    offsets = [r.offset for r in recs]
    assert offsets == sorted(set(offsets)) and set(offsets) <= set(before)
    assert offsets[-1] == total - 1  # the last record is the latest of its key: never removed
    seen = {r.key: r.value for r in recs}
    assert seen == latest
    gaps = sum(1 for a, b in itertools.pairwise([-1, *offsets]) if b != a + 1)
    assert gaps >= COMPACT_KEYS // 2  # between the latest values spread along the log
    print(f"\nSpark read {len(recs)} of {total} offsets of a compacted topic, {gaps} gaps")
