"""librdkafka (confluent_kafka) reads what ``pydmq produce`` wrote, and agrees on partitioning."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import pytest

from pydmq.cli import main
from pydmq.client import default_partition
from pydmq.testing.embedded import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("ck") / "d") as b:
        yield b


def _pydmq(argv: list[str], stdin: bytes | None = None) -> None:
    mp = pytest.MonkeyPatch()
    if stdin is not None:
        mp.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        assert main(argv) == 0
    finally:
        mp.undo()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_pydmq_produce(broker: EmbeddedBroker, codec: str) -> None:
    bootstrap = broker.bootstrap
    topic = f"ck-read-{codec}-{time.monotonic_ns() % 10**9}"
    _pydmq(["topics", "create", topic, "--partitions", "2", "-b", bootstrap])
    lines = [f"key{i % 5}|value-{i}-{'z' * (i % 30)}" for i in range(400)]
    _pydmq(
        [
            "produce",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-K",
            "|",
            "-H",
            "h1=x",
            "-H",
            "h2=y",
            "--compression",
            codec,
            "--batch-records",
            "150",
            "-q",
        ],
        stdin="\n".join(lines).encode() + b"\n",
    )
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"unused-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
        got: list[tuple[int, int, bytes, bytes, list[tuple[str, bytes]]]] = []
        deadline = time.monotonic() + 30
        while len(got) < len(lines) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()))
    finally:
        consumer.close()
    assert len(got) == len(lines)
    expected: dict[int, list[tuple[bytes, bytes]]] = {0: [], 1: []}
    for line in lines:
        key, value = line.encode().split(b"|", 1)
        expected[default_partition(key, 2)].append((key, value))
    for p in (0, 1):
        mine = sorted((o, k, v, h) for part, o, k, v, h in got if part == p)
        assert [o for o, *_ in mine] == list(range(len(expected[p])))
        assert [(k, v) for _, k, v, _ in mine] == expected[p]
        assert all(h == [("h1", b"x"), ("h2", b"y")] for *_, h in mine)


def test_partitioner_agrees_with_librdkafka_murmur2(broker: EmbeddedBroker) -> None:
    bootstrap = broker.bootstrap
    topic = f"ck-part-{time.monotonic_ns() % 10**9}"
    _pydmq(["topics", "create", topic, "--partitions", "7", "-b", bootstrap])
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    placed: dict[bytes, int] = {}

    def report(err: object, msg: object) -> None:
        assert err is None
        placed[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    keys = [f"user-{i}".encode() for i in range(60)] + [b"", b"a", b"\xff\x00\x80"]
    for key in keys:
        producer.produce(topic, value=b"v", key=key, on_delivery=report)
    assert producer.flush(30) == 0
    assert placed == {k: default_partition(k, 7) for k in keys}
