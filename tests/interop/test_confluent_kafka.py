"""confluent-kafka (librdkafka) against a pydmq broker process."""

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

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.interop


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futs = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futs[topic].result(30)
    # Wait until the topic's partitions show up in metadata.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} not visible in metadata")


def produce(bootstrap: str, topic: str, count: int, base_ts: int, codec: str, **conf) -> None:
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    # Stock configuration apart from compression (librdkafka's idempotence default is off).
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, **conf})
    for i in range(count):
        while True:
            try:
                p.produce(
                    topic,
                    value=value(i),
                    key=key(i),
                    partition=partition_of(i),
                    timestamp=timestamp(base_ts, i),
                    headers=headers(i),
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    remaining = p.flush(120)
    assert remaining == 0, f"{remaining} records not delivered"
    assert not errors, errors[:5]


def to_rec(msg) -> Rec:
    _tstype, ts = msg.timestamp()
    return Rec(
        partition=msg.partition(),
        offset=msg.offset(),
        timestamp=ts,
        key=msg.key(),
        value=msg.value(),
        headers=list(msg.headers() or []),
    )


def new_consumer(bootstrap: str, **conf) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("ck-unused-group"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )


def consume(c: Consumer, count: int, timeout: float = 90.0) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msg in c.consume(num_messages=min(10000, count - len(out)), timeout=0.5):
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            out.append(to_rec(msg))
    assert len(out) == count, f"consumed {len(out)} of {count} records"
    return out


def read_all(bootstrap: str, topic: str, count: int) -> list[Rec]:
    c = new_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        return consume(c, count)
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_codec(broker, codec: str) -> None:
    topic = unique_topic(f"ck-{codec}")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, CODEC_COUNT, base_ts, codec)
    recs = read_all(broker.bootstrap, topic, CODEC_COUNT)
    # librdkafka's default producer is not idempotent and may reorder on retry.
    check_topic(recs, CODEC_COUNT, base_ts, producer_ordered=False)


def test_roundtrip_100k(broker) -> None:
    topic = unique_topic("ck-big")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, BIG_COUNT, base_ts, "zstd")
    check_topic(
        read_all(broker.bootstrap, topic, BIG_COUNT), BIG_COUNT, base_ts, producer_ordered=False
    )


def test_idempotent_producer(broker) -> None:
    topic = unique_topic("ck-idem")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(broker.bootstrap, topic, 2000, base_ts, "lz4", **{"enable.idempotence": True})
    check_topic(read_all(broker.bootstrap, topic, 2000), 2000, base_ts)


@pytest.fixture(scope="module")
def filled(broker):
    """A topic with CODEC_COUNT records in multi-record batches (linger 20 ms), in
    producer order (idempotent), so timestamps grow with offsets."""
    topic = unique_topic("ck-filled")
    create_topic(broker.bootstrap, topic)
    base_ts = new_base_ts()
    produce(
        broker.bootstrap,
        topic,
        CODEC_COUNT,
        base_ts,
        "gzip",
        **{"linger.ms": 20, "enable.idempotence": True},
    )
    return topic, base_ts, CODEC_COUNT


def test_offsets_for_times(broker, filled) -> None:
    topic, base_ts, count = filled
    c = new_consumer(broker.bootstrap)
    try:
        for p, target, expected in timestamp_queries(count, base_ts):
            [res] = c.offsets_for_times([TopicPartition(topic, p, target)], timeout=30)
            assert res.error is None, res.error
            got = None if res.offset < 0 else res.offset
            assert got == expected, f"partition {p} target {target}: {got} != {expected}"
    finally:
        c.close()


def test_seek_into_batch(broker, filled) -> None:
    topic, base_ts, count = filled
    c = new_consumer(broker.bootstrap)
    try:
        for p in range(PARTITIONS):
            n = count_in_partition(p, count)
            for pos in (n // 2 + 1, n - 1):
                # assign() at an explicit offset ...
                c.assign([TopicPartition(topic, p, pos)])
                recs = consume(c, 3 if pos + 3 <= n else n - pos)
                assert recs[0].offset == pos
                check_partition_log(
                    recs, p, index_at(p, pos + len(recs)), base_ts, first_position=pos
                )
                c.unassign()
        # ... and seek() on a live assignment, backwards into the middle of a batch.
        c.assign([TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        consume(c, 10)
        target = count_in_partition(0, count) // 3
        c.seek(TopicPartition(topic, 0, target))
        [rec] = consume(c, 1)
        assert rec.offset == target
        check_record(rec, index_at(0, target), base_ts)
    finally:
        c.close()


def test_group_subscribe_and_commit(broker, filled) -> None:
    topic, base_ts, count = filled
    group = unique_topic("ck-group")
    c = new_consumer(broker.bootstrap, **{"group.id": group})
    try:
        c.subscribe([topic])
        recs = consume(c, count, timeout=60)
        check_topic(recs, count, base_ts)
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        assert {tp.partition: tp.offset for tp in committed} == {
            p: count_in_partition(p, count) for p in range(PARTITIONS)
        }
    finally:
        c.close()
