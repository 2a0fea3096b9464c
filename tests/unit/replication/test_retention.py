"""Retention and segment roll run in the broker's maintenance loop, seen through real clients."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pydmq.testing import EmbeddedBroker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def _earliest(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "w"})
    try:
        low, high = consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, 0), timeout=10
        )
    finally:
        consumer.close()
    return int(low), int(high)


def _produce(bootstrap: str, topic: str, count: int, timestamp: int | None = None) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"x" * 200 + b"%d" % i, partition=0, timestamp=timestamp or 0)
        producer.flush(10)
    assert producer.flush(10) == 0


def test_time_retention_deletes_old_segments(tmp_path: Path) -> None:
    overrides = {"log.retention.check.interval.ms": 200}
    with EmbeddedBroker(tmp_path / "d", overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"retention.ms": "1000", "internal.segment.bytes": "1024"}
        for future in admin.create_topics([NewTopic("old", 1, 1, config=configs)]).values():
            future.result(10)
        old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms
        _produce(broker.bootstrap, "old", 30, timestamp=old)
        _produce(broker.bootstrap, "old", 2)  # recent records in the active segment stay
        deadline = time.monotonic() + 15
        low, high = _earliest(broker.bootstrap, "old")
        while low == 0 and time.monotonic() < deadline:
            time.sleep(0.3)
            low, high = _earliest(broker.bootstrap, "old")
        assert high == 32
        assert 0 < low <= 30, (low, high)


def test_size_retention_keeps_the_newest_bytes(tmp_path: Path) -> None:
    overrides = {"log.retention.check.interval.ms": 200}
    with EmbeddedBroker(tmp_path / "d", overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"retention.bytes": "3000", "internal.segment.bytes": "1024"}
        for future in admin.create_topics([NewTopic("big", 1, 1, config=configs)]).values():
            future.result(10)
        _produce(broker.bootstrap, "big", 40)
        deadline = time.monotonic() + 15
        low, high = _earliest(broker.bootstrap, "big")
        while low == 0 and time.monotonic() < deadline:
            time.sleep(0.3)
            low, high = _earliest(broker.bootstrap, "big")
        assert high == 40
        # about 3000 bytes of ~270-byte batches remain, plus at most one segment's slack
        assert 20 <= low < 40, (low, high)
