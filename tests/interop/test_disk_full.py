"""A full disk under an idempotent acks=all confluent-kafka producer: nothing acknowledged is lost.

The broker runs as a child process with its data dir on a small tmpfs (root only: ``mount -t
tmpfs``; skipped otherwise). One idempotent producer streams 1 KiB records numbered 0, 1, 2...
into one partition until the disk fills and the broker answers KAFKA_STORAGE_ERROR (librdkafka
logs it as "Disk error when trying to access log file on disk" and retries), and a while
longer. Then, with the disk still full:

* every record acknowledged so far reads back, in order, through an assigned consumer, and
  ListOffsets latest is the log end;
* an offset commit gets an answer with a Kafka error code (or succeeds if the last page of the
  offsets segment still had room), never a closed connection.

The tmpfs is grown (``mount -o remount,size=``); the same producer's retries then succeed
(no OUT_OF_ORDER_SEQUENCE_NUMBER, no duplicate: a refused batch left the producer state as it
was) and more records are produced. After a restart of the broker every acknowledged record
is read back exactly once, in order, and the log holds nothing else.

On af52f34 a short write followed by ENOSPC left torn bytes in the segment that later appends
built on: reads failed with "bad batch framing" (connection closed) and the restart cut the
log at the torn batch, losing the acknowledged records after it.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.testing.process import BrokerProcess
from support.broker_checks import LATEST, create_topic, list_offset
from support.raw_client import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "full"
SIZE_MB = 32
GROWN_MB = 256
VALUE = b"v" * 1014  # + a 10-digit number: 1 KiB records
AFTER_FULL_S = 3.0  # keep producing this long after the first storage error
MORE_AFTER_GROWTH = 5000
STORAGE_ERROR_TEXT = "Disk error when trying to access log file on disk"  # librdkafka's text


@pytest.fixture
def small_disk() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = Path(tempfile.mkdtemp(prefix="pydmq-full-"))
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(mount)], check=True
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)
        Path(f"{mount}-broker.log").unlink(missing_ok=True)


class Deliveries:
    """Delivery reports and librdkafka's log lines, as the producer reports them."""

    def __init__(self) -> None:
        self.acked: dict[int, int] = {}  # record number -> offset
        self.failed: dict[str, int] = {}
        self.log_lines: list[str] = []

    def report(self, err: object, msg: object) -> None:
        if err is None:
            self.acked[int(msg.value()[:10])] = msg.offset()  # type: ignore[attr-defined]
        else:
            name = err.name()  # type: ignore[attr-defined]
            self.failed[name] = self.failed.get(name, 0) + 1

    def count(self, text: str) -> int:
        return sum(text in line for line in list(self.log_lines))


class _Lines(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record.getMessage())


def _producer(bootstrap: str, deliveries: Deliveries) -> confluent_kafka.Producer:
    logger = logging.getLogger(f"rdkafka-{id(deliveries)}")
    logger.addHandler(_Lines(deliveries.log_lines))
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "retry.backoff.ms": 100,
            "retry.backoff.max.ms": 500,
            "queue.buffering.max.messages": 20000,
            "debug": "msg",
        },
        logger=logger,
    )


def _produce(
    producer: confluent_kafka.Producer, deliveries: Deliveries, first: int, n: int, block: bool
) -> int:
    """Produce records ``first``... (``n`` of them, fewer without ``block`` once the producer's
    queue is full); returns the next record number."""
    i = first
    while i < first + n:
        try:
            producer.produce(TOPIC, b"%010d" % i + VALUE, callback=deliveries.report)
            i += 1
        except BufferError:
            if not block:
                break
            producer.poll(0.05)
        producer.poll(0)
    return i


def _read_all(bootstrap: str, end: int) -> list[tuple[int, int]]:
    """(offset, record number) of every record from offset 0 up to ``end``."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    out: list[tuple[int, int]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                out.append((msg.offset(), int(msg.value()[:10])))
    finally:
        consumer.close()
    return out


def _commit(bootstrap: str, offset: int) -> int:
    request = OffsetCommitRequest(
        group_id="full-group",
        topics=[
            OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
                ],
            )
        ],
    )
    with RawClient(bootstrap) as client:
        response = client.request(8, 2, request)
    return int(response.body.topics[0].partitions[0].error_code)


def _check_log(records: list[tuple[int, int]], acked: dict[int, int]) -> None:
    numbers = [n for _, n in records]
    assert [o for o, _ in records] == list(range(len(records))), "offsets are not contiguous"
    assert numbers == sorted(set(numbers)), "a record is duplicated or out of order"
    offsets = dict((n, o) for o, n in records)
    lost = [n for n in acked if n not in offsets]
    assert not lost, f"{len(lost)} acknowledged records lost, first {lost[:5]}"
    moved = [n for n, o in acked.items() if offsets[n] != o]
    assert not moved, f"acknowledged records at other offsets: {moved[:5]}"


def test_full_disk_loses_no_acknowledged_record(small_disk: Path) -> None:
    broker = BrokerProcess(
        small_disk / "data",
        overrides={"num.partitions": 1, "log.segment.bytes": 4 * 1024 * 1024},
        log_path=small_disk.parent / f"{small_disk.name}-broker.log",
    )
    broker.start()
    try:
        with RawClient(broker.bootstrap) as client:
            assert create_topic(client, TOPIC, 1) == ErrorCode.NONE
        assert _commit(broker.bootstrap, 0) == ErrorCode.NONE  # __consumer_offsets exists
        deliveries = Deliveries()
        producer = _producer(broker.bootstrap, deliveries)
        sent = 0
        full_at: float | None = None
        started = time.monotonic()
        while full_at is None or time.monotonic() - full_at < AFTER_FULL_S:
            assert time.monotonic() - started < 40, (
                "no KAFKA_STORAGE_ERROR within 40 s: the disk did not fill or the broker closed "
                "connections instead"
            )
            sent = _produce(producer, deliveries, sent, 500, block=False)
            producer.poll(0.01)
            if full_at is None and deliveries.count(STORAGE_ERROR_TEXT):
                full_at = time.monotonic()
        producer.poll(1.0)
        acked_while_full = dict(deliveries.acked)
        storage_errors = deliveries.count(STORAGE_ERROR_TEXT)
        assert storage_errors > 0
        assert len(acked_while_full) < sent, "nothing was refused: the disk did not fill"

        # Still full: everything acknowledged reads back; ListOffsets and commits answer.
        end = max(acked_while_full.values()) + 1
        _check_log(_read_all(broker.bootstrap, end), acked_while_full)
        with RawClient(broker.bootstrap) as client:
            assert list_offset(client, TOPIC, 0, LATEST) >= end
        full_commit = _commit(broker.bootstrap, end)
        assert full_commit in (
            ErrorCode.NONE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ), ErrorCode(full_commit).name

        subprocess.run(["mount", "-o", f"remount,size={GROWN_MB}m", str(small_disk)], check=True)
        sent = _produce(producer, deliveries, sent, MORE_AFTER_GROWTH, block=True)
        assert producer.flush(60) == 0, "records still undelivered after the disk grew"
        assert deliveries.failed == {}, f"delivery failures: {deliveries.failed}"
        assert len(deliveries.acked) == sent
        assert deliveries.count("OUT_OF_ORDER_SEQUENCE") == 0
        assert _commit(broker.bootstrap, sent) == ErrorCode.NONE

        broker.restart()
        records = _read_all(broker.bootstrap, sent)
        _check_log(records, deliveries.acked)
        assert len(records) == sent, f"{len(records)} records in the log, {sent} acknowledged"
        print(
            f"\nacked before full: {len(acked_while_full)}, storage errors seen by the producer: "
            f"{storage_errors}, records acked after growth: {sent - len(acked_while_full)}, "
            f"commit while full: {ErrorCode(full_commit).name}, total read back: {len(records)}"
        )
    finally:
        broker.stop()
