"""aiokafka against a pydmq broker process (plain asyncio.run, no pytest-asyncio)."""

from __future__ import annotations

import asyncio
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

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.interop


async def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
        )
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, count: int, base_ts: int, codec: str, **conf):
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        **conf,
    )
    await p.start()
    try:
        pending = []
        for i in range(count):
            pending.append(
                await p.send(
                    topic,
                    value=value(i),
                    key=key(i),
                    partition=partition_of(i),
                    timestamp_ms=timestamp(base_ts, i),
                    headers=headers(i),
                )
            )
            if len(pending) >= 5000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await p.stop()


def to_rec(r) -> Rec:
    return Rec(
        partition=r.partition,
        offset=r.offset,
        timestamp=r.timestamp,
        key=r.key,
        value=r.value,
        headers=list(r.headers or []),
    )


def new_consumer(bootstrap: str, **conf) -> AIOKafkaConsumer:
    conf.setdefault("enable_auto_commit", False)
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **conf)


async def consume(c: AIOKafkaConsumer, count: int, timeout: float = 120.0) -> list[Rec]:
    out: list[Rec] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        batches = await c.getmany(timeout_ms=500, max_records=min(10000, count - len(out)))
        for recs in batches.values():
            out.extend(to_rec(r) for r in recs)
    assert len(out) == count, f"consumed {len(out)} of {count} records"
    return out


async def read_all(bootstrap: str, topic: str, count: int) -> list[Rec]:
    c = new_consumer(bootstrap)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        return await consume(c, count)
    finally:
        await c.stop()


async def roundtrip(bootstrap: str, prefix: str, count: int, codec: str) -> None:
    topic = unique_topic(prefix)
    await create_topic(bootstrap, topic)
    base_ts = new_base_ts()
    await produce(bootstrap, topic, count, base_ts, codec)
    recs = await read_all(bootstrap, topic, count)
    check_topic(recs, count, base_ts, producer_ordered=False)


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_codec(broker, codec: str) -> None:
    asyncio.run(roundtrip(broker.bootstrap, f"aio-{codec}", CODEC_COUNT, codec))


def test_roundtrip_100k(broker) -> None:
    asyncio.run(roundtrip(broker.bootstrap, "aio-big", BIG_COUNT, "gzip"))


@pytest.fixture(scope="module")
def filled(broker):
    """CODEC_COUNT records in multi-record batches, in producer order (idempotent)."""
    topic = unique_topic("aio-filled")
    base_ts = new_base_ts()

    async def fill() -> None:
        await create_topic(broker.bootstrap, topic)
        await produce(
            broker.bootstrap,
            topic,
            CODEC_COUNT,
            base_ts,
            "zstd",
            linger_ms=20,
            enable_idempotence=True,
        )

    asyncio.run(fill())
    return topic, base_ts, CODEC_COUNT


def test_idempotent_order(broker, filled) -> None:
    topic, base_ts, count = filled
    check_topic(asyncio.run(read_all(broker.bootstrap, topic, count)), count, base_ts)


def test_offsets_for_times(broker, filled) -> None:
    topic, base_ts, count = filled

    async def run() -> None:
        c = new_consumer(broker.bootstrap)
        await c.start()
        try:
            for p, target, expected in timestamp_queries(count, base_ts):
                tp = TopicPartition(topic, p)
                res = (await c.offsets_for_times({tp: target}))[tp]
                got = None if res is None else res.offset
                assert got == expected, f"partition {p} target {target}: {got} != {expected}"
        finally:
            await c.stop()

    asyncio.run(run())


def test_seek_into_batch(broker, filled) -> None:
    topic, base_ts, count = filled

    async def run() -> None:
        c = new_consumer(broker.bootstrap)
        await c.start()
        try:
            for p in range(PARTITIONS):
                tp = TopicPartition(topic, p)
                c.assign([tp])
                n = count_in_partition(p, count)
                for pos in (n // 2 + 1, n - 1):
                    c.seek(tp, pos)
                    k = min(3, n - pos)
                    recs = await consume(c, k)
                    assert recs[0].offset == pos
                    check_partition_log(recs, p, index_at(p, pos + k), base_ts, first_position=pos)
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            await consume(c, 10)
            target = count_in_partition(0, count) // 3
            c.seek(tp, target)
            [rec] = await consume(c, 1)
            assert rec.offset == target
            check_record(rec, index_at(0, target), base_ts)
        finally:
            await c.stop()

    asyncio.run(run())


def test_group_subscribe_and_commit(broker, filled) -> None:
    topic, base_ts, count = filled
    group = unique_topic("aio-group")

    async def run() -> None:
        c = new_consumer(broker.bootstrap, group_id=group)
        await c.start()
        try:
            c.subscribe([topic])
            check_topic(await consume(c, count, timeout=60), count, base_ts)
            await c.commit()
            for p in range(PARTITIONS):
                assert await c.committed(TopicPartition(topic, p)) == count_in_partition(p, count)
        finally:
            await c.stop()

    asyncio.run(run())
