"""confluent-kafka helpers shared by the transaction proofs: topics, readers, end offsets.

Everything here is a plain function of a bootstrap address; every wait is bounded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

TIMEOUT = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topics(bootstrap: str, names: Iterable[str], partitions: int, replication: int) -> None:
    """Create the topics and wait until every partition has a leader."""
    names = list(names)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, replication) for n in names])
    for name in names:
        futures[name].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        topics = admin.list_topics(timeout=TIMEOUT).topics
        ready = all(
            n in topics
            and len(topics[n].partitions) == partitions
            and all(p.leader >= 0 for p in topics[n].partitions.values())
            for n in names
        )
        if ready:
            return
        assert time.monotonic() < deadline, f"topics {names} have no leaders yet"
        time.sleep(0.1)


@dataclass(frozen=True)
class Seen:
    """One record as a consumer returned it."""

    partition: int
    offset: int
    key: str | None
    value: str | None


def reader(bootstrap: str, isolation: str, **extra: object) -> Consumer:
    """An assign-only consumer (no group offsets are committed) at ``isolation``
    (``read_committed`` or ``read_uncommitted``)."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def poll_records(consumer: Consumer, timeout: float) -> list[Seen]:
    """What one poll returns (at most ``timeout`` s), errors other than a partition's end
    failing the test."""
    out: list[Seen] = []
    for msg in consumer.consume(500, timeout):
        err = msg.error()
        if err is not None:
            assert err.code() == KafkaError._PARTITION_EOF, err
            continue
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        out.append(Seen(partition, offset, _text(msg.key()), _text(msg.value())))
    return out


def read_to_end(
    bootstrap: str, topic: str, partitions: int, isolation: str
) -> tuple[list[Seen], dict[int, int]]:
    """Every record of ``topic`` a consumer at ``isolation`` returns up to the end it sees
    (the last stable offset for read_committed, the high watermark otherwise), and each
    partition's position once there."""
    consumer = reader(bootstrap, isolation, **{"enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        seen: list[Seen] = []
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end reached on {at_end}"
            for msg in consumer.consume(500, 0.5):
                err = msg.error()
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    at_end.add(partition)
                    continue
                assert offset is not None
                at_end.discard(partition)
                seen.append(Seen(partition, offset, _text(msg.key()), _text(msg.value())))
        got = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        positions = {tp.partition: tp.offset for tp in got}
        return sorted(seen, key=lambda s: (s.partition, s.offset)), positions
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, int]:
    """ListOffsets ``latest`` per partition at ``isolation``: the high watermark
    (read_uncommitted) or the last stable offset (read_committed)."""
    level = (
        IsolationLevel.READ_COMMITTED
        if isolation == "read_committed"
        else IsolationLevel.READ_UNCOMMITTED
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
        isolation_level=level,
        request_timeout=TIMEOUT,
    )
    return {tp.partition: int(f.result(TIMEOUT).offset) for tp, f in futures.items()}


def has_open_transaction(bootstrap: str, topic: str, partitions: int) -> bool:
    """Whether some partition holds records of a transaction not yet completed (its last
    stable offset is below its high watermark)."""
    stable = end_offsets(bootstrap, topic, partitions, "read_committed")
    high = end_offsets(bootstrap, topic, partitions, "read_uncommitted")
    return any(stable[p] < high[p] for p in range(partitions))
