"""Spark's Kafka source reading transactional topics from a pydmq broker process.

confluent-kafka's transactional producer writes, on every partition of a 3-partition
topic, transactions that commit and abort in turn; each one leaves a control record (its
marker) in the log, so the data offsets have gaps. Spark's Kafka source (the Java
kafka-clients consumer underneath, see spark_support.py) with
``kafka.isolation.level=read_committed`` must return exactly the committed records, at their
offsets, across those gaps with ``failOnDataLoss`` on (a gap it could not explain would
fail the query); with read_uncommitted it returns the aborted records too. With a
transaction still open, read_committed's ``latest`` ends at the last stable offset.
Both a batch read and an availableNow streaming read are checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import spark_support as ss
from .support import PARTITIONS, unique_topic

pyspark = pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

# The transactions written to every partition, in order, and whether each commits.
TRANSACTIONS = (("c0", True), ("a1", False), ("c2", True), ("a3", False), ("c4", True))
PER_TRANSACTION = 4  # records per partition in each transaction
QUERY_TIMEOUT = 120.0

Position = tuple[int, int, bytes]  # (partition, offset, value)


@pytest.fixture(scope="module")
def spark(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Depends on the broker so that Spark stops before it does.
    session = ss.spark_session(tmp_path_factory.mktemp("spark-txn"))
    try:
        yield session
    finally:
        ss.stop_spark(session)


@pytest.fixture(scope="module")
def bootstrap(broker: Any) -> str:
    return str(broker.bootstrap)


def record_value(txn: str, partition: int, n: int) -> bytes:
    return f"{txn}/p{partition}/{n}".encode()


def write_transactions(
    bootstrap: str, topic: str, transactions: tuple[tuple[str, bool], ...]
) -> tuple[list[Position], list[Position]]:
    """Write ``transactions`` with one transactional producer; returns (committed records,
    every data record) with the offsets they landed at (from the delivery reports)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tid", "linger.ms": 5}
    )
    producer.init_transactions(30)
    committed: list[Position] = []
    written: list[Position] = []
    for txn, commit in transactions:
        landed: list[Position] = []

        def on_delivery(err: Any, msg: Any, landed: list[Position] = landed) -> None:
            assert err is None, err
            landed.append((msg.partition(), msg.offset(), msg.value()))

        producer.begin_transaction()
        for p in range(PARTITIONS):
            for n in range(PER_TRANSACTION):
                producer.produce(
                    topic, record_value(txn, p, n), partition=p, on_delivery=on_delivery
                )
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
            committed.extend(landed)
        else:
            producer.abort_transaction(30)
        written.extend(landed)
    return sorted(committed), sorted(written)


def open_transaction(bootstrap: str, topic: str) -> tuple[Any, list[Position]]:
    """A producer with one transaction left open on every partition (records flushed)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-open", "linger.ms": 5}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    landed: list[Position] = []
    for p in range(PARTITIONS):
        producer.produce(
            topic,
            record_value("open", p, 0),
            partition=p,
            on_delivery=lambda err, msg: landed.append(
                (msg.partition(), msg.offset(), msg.value())
            ),
        )
    assert producer.flush(30) == 0
    return producer, sorted(landed)


def spark_positions(df: Any) -> list[Position]:
    rows = df.select("partition", "offset", "value").collect()
    return sorted((r["partition"], r["offset"], bytes(r["value"])) for r in rows)


def batch_read(spark: Any, bootstrap: str, topic: str, isolation: str) -> list[Position]:
    return spark_positions(
        ss.kafka_df(
            spark,
            bootstrap,
            subscribe=topic,
            startingOffsets="earliest",
            endingOffsets="latest",
            failOnDataLoss="true",
            **{"kafka.isolation.level": isolation},  # type: ignore[arg-type]
        )
    )


@pytest.fixture(scope="module")
def transactional_topic(bootstrap: str) -> tuple[str, list[Position], list[Position]]:
    topic = unique_topic("spark-txn")
    ss.create_topic(bootstrap, topic)
    committed, written = write_transactions(bootstrap, topic, TRANSACTIONS)
    return topic, committed, written


def test_layout_has_marker_gaps(
    transactional_topic: tuple[str, list[Position], list[Position]],
) -> None:
    """The premise: every transaction's marker takes an offset, so the data has gaps."""
    _, committed, written = transactional_topic
    per_txn = PER_TRANSACTION + 1  # the records and the marker
    assert [(p, o) for p, o, _ in written] == [
        (p, t * per_txn + n)
        for p in range(PARTITIONS)
        for t in range(len(TRANSACTIONS))
        for n in range(PER_TRANSACTION)
    ]
    assert len(committed) == PARTITIONS * PER_TRANSACTION * 3


def test_batch_read_committed_skips_aborted(
    spark: Any, bootstrap: str, transactional_topic: tuple[str, list[Position], list[Position]]
) -> None:
    topic, committed, _ = transactional_topic
    assert batch_read(spark, bootstrap, topic, "read_committed") == committed


def test_batch_read_uncommitted_returns_aborted(
    spark: Any, bootstrap: str, transactional_topic: tuple[str, list[Position], list[Position]]
) -> None:
    topic, _, written = transactional_topic
    assert batch_read(spark, bootstrap, topic, "read_uncommitted") == written


def test_streaming_read_committed(
    spark: Any,
    bootstrap: str,
    transactional_topic: tuple[str, list[Position], list[Position]],
    tmp_path: Path,
) -> None:
    topic, committed, _ = transactional_topic
    stream = ss.kafka_df(
        spark,
        bootstrap,
        stream=True,
        subscribe=topic,
        startingOffsets="earliest",
        failOnDataLoss="true",
        maxOffsetsPerTrigger="7",  # several micro-batches, boundaries inside the gaps
        **{"kafka.isolation.level": "read_committed"},
    ).select("partition", "offset", "value")
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT), "availableNow run did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    assert spark_positions(spark.read.parquet(str(tmp_path / "out"))) == committed


def test_read_committed_stops_at_open_transaction(spark: Any, bootstrap: str) -> None:
    """With a transaction open, read_committed's latest is the last stable offset: the
    committed records before it are returned, the open ones only read_uncommitted."""
    topic = unique_topic("spark-txn-open")
    ss.create_topic(bootstrap, topic)
    committed, written = write_transactions(bootstrap, topic, TRANSACTIONS[:2])
    producer, pending = open_transaction(bootstrap, topic)
    try:
        assert batch_read(spark, bootstrap, topic, "read_committed") == committed
        assert batch_read(spark, bootstrap, topic, "read_uncommitted") == sorted(written + pending)
        producer.commit_transaction(30)
        assert batch_read(spark, bootstrap, topic, "read_committed") == sorted(committed + pending)
    finally:
        producer.flush(10)
