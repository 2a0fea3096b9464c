"""Log compaction over real TCP with confluent-kafka (librdkafka) against a broker process.

A ``cleanup.policy=compact`` topic with small segments (``internal.segment.bytes``: Kafka 4
and pydmq refuse ``segment.bytes`` under 1 MiB with INVALID_CONFIG) receives many updates of a
few keys and some tombstones; the broker's cleaner thread compacts it while the producer runs.
Then a consumer reading from the beginning sees, for every key, its latest value last, with
offset gaps where older values were, and the partition's segment files are much smaller than
what was produced; after a restart the same is read again.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import BrokerProcess, start_broker
from .support import unique_topic

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

KEYS = 20
UPDATES = 300  # per key
VALUE = 200  # bytes


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-compaction-"))
    b = start_broker(root, {"log.cleaner.backoff.ms": "100"})
    if not isinstance(b, BrokerProcess):
        pytest.skip("needs a pydmq broker process (its data directory is measured)")
    try:
        yield b
    finally:
        b.stop()
        shutil.rmtree(root, ignore_errors=True)


def segment_bytes(b: BrokerProcess, topic: str) -> int:
    total = 0
    for path in (Path(b.data_dir) / f"{topic}-0").glob("*.log"):
        with contextlib.suppress(FileNotFoundError):  # a swap removed it meanwhile
            total += path.stat().st_size
    return total


def test_segment_bytes_under_one_mib_is_invalid_config(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique_topic("small-segments")
    future = admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "200"})])[topic]
    with pytest.raises(KafkaException) as refused:
        future.result(30)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


def test_a_consumer_reads_the_latest_value_of_every_key(broker: BrokerProcess) -> None:
    topic = unique_topic("compacted")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {
        "cleanup.policy": "compact",
        "internal.segment.bytes": "16384",
        "min.cleanable.dirty.ratio": "0.1",
        "delete.retention.ms": "3600000",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 4096,  # many batches, so many segments
        }
    )
    latest: dict[bytes, bytes | None] = {}
    produced = 0
    order = list(range(KEYS))
    shuffle = random.Random(17).shuffle
    for update in range(UPDATES):
        shuffle(order)  # each round in another order: the latest values are not adjacent
        for k in order:
            key = b"key-%02d" % k
            value = None if k == 0 and update == UPDATES - 1 else b"%06d" % update * (VALUE // 6)
            producer.produce(topic, value, key)
            latest[key] = value
            produced += len(key) + len(value or b"")
        producer.poll(0)
    assert producer.flush(30) == 0
    # The cleaner runs on its own thread: wait (bounded) until the files shrank.
    deadline = time.monotonic() + 60
    while segment_bytes(broker, topic) * 10 > produced and time.monotonic() < deadline:
        time.sleep(0.2)
    on_disk = segment_bytes(broker, topic)
    print(f"\nproduced {produced} bytes of keys and values; {on_disk} bytes of segments remain")
    assert on_disk * 10 <= produced, "the log was not compacted within 60 s"

    offsets, seen, high = read_from_the_beginning(broker.bootstrap, topic)
    assert offsets and offsets[-1] == high - 1 == KEYS * UPDATES - 1
    assert seen == latest  # the last value read of every key is its latest (a tombstone too)
    assert offsets == sorted(set(offsets))
    assert len(offsets) < KEYS * UPDATES // 4, "the consumer read the old values"
    # Offsets skipped where older values were (the first batches read start past offset 0).
    gaps = sum(1 for a, b in itertools.pairwise([-1, *offsets]) if b != a + 1)
    assert gaps > 0
    print(f"read {len(offsets)} of {KEYS * UPDATES} offsets, {gaps} gaps")

    # A restart opens the swapped segments (their LMDB entries, the cleaner checkpoint).
    broker.restart()
    offsets_again, seen_again, high_again = read_from_the_beginning(broker.bootstrap, topic)
    assert (seen_again, high_again) == (latest, high)
    assert set(offsets_again) <= set(offsets)  # the cleaner may have gone on meanwhile


def read_from_the_beginning(
    bootstrap: str, topic: str
) -> tuple[list[int], dict[bytes, bytes | None], int]:
    """(offsets read, the last value read per key, the high watermark) of partition 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen: dict[bytes, bytes | None] = {}
    offsets: list[int] = []
    _, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    deadline = time.monotonic() + 30
    while (not offsets or offsets[-1] < high - 1) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None or message.error() is not None:
            continue
        offsets.append(message.offset())
        seen[message.key()] = message.value()
    consumer.close()
    return offsets, seen, high
