"""kafka-python against a pydmq broker process (no api_version hint: it probes)."""

from __future__ import annotations

import time

import pytest

from .support import (
    BIG_COUNT,
    CODEC_COUNT,
    CODECS,
    PARTITIONS,
    Rec,
    check_partition_log,
    check_record,
    check_topic,
    count_in_partition,
    headers,
    index_at,
    key,
    new_base_ts,
    partition_of,
    timestamp,
    timestamp_queries,
    unique_topic,
    value,
)

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.interop


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, count: int, base_ts: int, codec: str, **conf) -> None:
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        **conf,
    )
    try:
        futures = []
        for i in range(count):
            futures.append(
                p.send(
                    topic,
                    value=value(i),
                    key=key(i),
                    headers=headers(i),
                    partition=partition_of(i),
                    timestamp_ms=timestamp(base_ts, i),
                )
            )
        p.flush(120)
        for f in futures:
            f.get(timeout=60)  # raises on a failed delivery
    finally:
        p.close(timeout=30)


def to_rec(r) -> Rec:
    return Rec(
        partition=r.partition,
        offset=r.offset,
        timestamp=r.timestamp,
        key=r.key,
        value=r.value,
        headers=list(r.headers or []),
    )


def new_consumer(bootstrap: str, **conf) -> KafkaConsumer:
    conf.setdefault("group_id", None)
    conf.setdefault("enable_auto_commit", False)
    return KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **conf)


def consume(c: KafkaConsumer, count: int, timeout: float = 120.0) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        batches = c.poll(timeout_ms=500, max_records=min(10000, count - len(out)))
        # poll() groups by partition; each partition's list is in offset order.
        for recs in batches.values():
            out.extend(to_rec(r) for r in recs)
    assert len(out) == count, f"consumed {len(out)} of {count} records"
    return out


def read_all(bootstrap: str, topic: str, count: int) -> list[Rec]:
    c = new_consumer(bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return consume(c, count)
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_codec(broker, codec: str) -> None:
    topic = unique_topic(f"kp-{codec}")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, CODEC_COUNT, base_ts, codec)
    recs = read_all(broker.bootstrap, topic, CODEC_COUNT)
    check_topic(recs, CODEC_COUNT, base_ts, producer_ordered=False)


def test_roundtrip_100k(broker) -> None:
    topic = unique_topic("kp-big")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, BIG_COUNT, base_ts, "snappy")
    recs = read_all(broker.bootstrap, topic, BIG_COUNT)
    check_topic(recs, BIG_COUNT, base_ts, producer_ordered=False)


@pytest.fixture(scope="module")
def filled(broker):
    """CODEC_COUNT records in multi-record batches, in producer order (idempotent)."""
    topic = unique_topic("kp-filled")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(
        broker.bootstrap, topic, CODEC_COUNT, base_ts, "lz4", linger_ms=20, enable_idempotence=True
    )
    return topic, base_ts, CODEC_COUNT


def test_idempotent_order(broker, filled) -> None:
    topic, base_ts, count = filled
    check_topic(read_all(broker.bootstrap, topic, count), count, base_ts)


def test_offsets_for_times(broker, filled) -> None:
    topic, base_ts, count = filled
    c = new_consumer(broker.bootstrap)
    try:
        for p, target, expected in timestamp_queries(count, base_ts):
            tp = TopicPartition(topic, p)
            res = c.offsets_for_times({tp: target})[tp]
            got = None if res is None else res.offset
            assert got == expected, f"partition {p} target {target}: {got} != {expected}"
            if res is not None:
                assert res.timestamp == timestamp(base_ts, index_at(p, expected))
    finally:
        c.close()


def test_seek_into_batch(broker, filled) -> None:
    topic, base_ts, count = filled
    c = new_consumer(broker.bootstrap)
    try:
        for p in range(PARTITIONS):
            tp = TopicPartition(topic, p)
            c.assign([tp])
            n = count_in_partition(p, count)
            for pos in (n // 2 + 1, n - 1):
                c.seek(tp, pos)
                k = min(3, n - pos)
                recs = consume(c, k)
                assert recs[0].offset == pos
                check_partition_log(recs, p, index_at(p, pos + k), base_ts, first_position=pos)
        # Backwards seek on a live assignment.
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        consume(c, 10)
        target = count_in_partition(0, count) // 3
        c.seek(tp, target)
        [rec] = consume(c, 1)
        assert rec.offset == target
        check_record(rec, index_at(0, target), base_ts)
    finally:
        c.close()


def test_group_subscribe_and_commit(broker, filled) -> None:
    topic, base_ts, count = filled
    group = unique_topic("kp-group")
    c = new_consumer(broker.bootstrap, group_id=group)
    try:
        c.subscribe([topic])
        check_topic(consume(c, count, timeout=60), count, base_ts)
        c.commit()
        for p in range(PARTITIONS):
            assert c.committed(TopicPartition(topic, p)) == count_in_partition(p, count)
    finally:
        c.close()
