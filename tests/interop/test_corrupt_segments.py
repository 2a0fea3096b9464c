"""Stray and damaged segment files at start-up, seen by a real client (confluent-kafka).

A broker process holds 2,000 records (values ``v<offset>``) in several segments and is stopped
cleanly; the test damages its files in one of three ways and starts it again:

* an empty stray segment file named after an offset inside the last segment's range (on
  af52f34 the log then ended there): the broker sets it aside (WARNING naming it) and serves
  all 2,000 records;
* a whole segment overwritten with zeros: the broker refuses to start, naming the file;
* 100 zero bytes in the middle of a segment: the broker starts, serves every record before the
  damage, answers the damaged offsets with CORRUPT_MESSAGE (the consumer gets an error event
  within seconds: no stall, no reconnect loop), serves the intact records after it once the
  consumer seeks past, and logs one ERROR naming the file and byte position.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.records import iter_batch_headers
from pydmq.testing.process import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "damaged"
RECORDS = 2_000
ERROR_EVENT_WITHIN_S = 15.0  # a generous bound that only catches a stall


@pytest.fixture
def stopped_broker() -> Iterator[BrokerProcess]:
    """A broker that held 2,000 records in several segments and was stopped cleanly."""
    root = Path(tempfile.mkdtemp(prefix="pydmq-damaged-"))
    broker = BrokerProcess(
        root / "data",
        overrides={
            "num.partitions": 1,
            "auto.create.topics.enable": "true",
            "log.segment.bytes": 4096,
            "log.index.interval.bytes": 512,
        },
        log_path=root / "broker.log",
    )
    broker.start()
    try:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 0,
                "batch.num.messages": 20,
            }
        )
        acked: list[int] = []

        def delivered(err: object, msg: object) -> None:
            assert err is None, err
            acked.append(msg.offset())  # type: ignore[attr-defined]

        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%05d" % i, partition=0, on_delivery=delivered)
            if i % 100 == 99:
                producer.flush(10)
        assert producer.flush(15) == 0
        assert sorted(acked) == list(range(RECORDS))
        del producer
        broker.stop()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def segments(broker: BrokerProcess) -> list[Path]:
    files = sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))
    assert len(files) >= 4, files
    return files


def consume(broker: BrokerProcess, start: int, until: int) -> tuple[dict[int, bytes], list[object]]:
    """Read offsets [start, until) with an assigned consumer; stops at the first error event.

    Returns the records read and the error events seen."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{start}",
            "enable.auto.commit": False,
            "fetch.error.backoff.ms": 100,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, start)])
    records: dict[int, bytes] = {}
    errors: list[object] = []
    deadline = time.monotonic() + ERROR_EVENT_WITHIN_S
    try:
        while time.monotonic() < deadline and len(records) < until - start:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                errors.append(msg.error())
                break
            records[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return records, errors


def expected(offsets: range) -> dict[int, bytes]:
    return {i: b"v%05d" % i for i in offsets}


def test_empty_stray_segment_is_set_aside_and_every_record_served(
    stopped_broker: BrokerProcess,
) -> None:
    broker = stopped_broker
    last = segments(broker)[-1]
    stray = last.parent / f"{int(last.name[:20]) + 7:020d}.log"  # inside the active segment
    stray.touch()
    broker.start()
    records, errors = consume(broker, 0, RECORDS)
    assert errors == []
    assert records == expected(range(RECORDS))
    log = broker.log_path.read_text(errors="replace")
    assert "WARNING" in log and f"{stray}: moved aside" in log


def test_zeroed_segment_refuses_to_start_naming_the_file(stopped_broker: BrokerProcess) -> None:
    broker = stopped_broker
    victim = segments(broker)[2]
    victim.write_bytes(b"\x00" * victim.stat().st_size)
    with pytest.raises(RuntimeError) as refused:
        broker.start()
    assert "refusing to open the log" in str(refused.value)
    assert str(victim) in str(refused.value)


def test_zero_bytes_mid_segment_surface_corrupt_message_and_serve_the_rest(
    stopped_broker: BrokerProcess,
) -> None:
    broker = stopped_broker
    victim = segments(broker)[2]
    data = victim.read_bytes()
    batches = [(h.position, h.size, h.base_offset, h.last_offset) for h in iter_batch_headers(data)]
    at = len(data) // 2
    damaged = [b for b in batches if b[0] < at + 100 and b[0] + b[1] > at]
    first_bad, last_bad = damaged[0][2], damaged[-1][3]
    with open(victim, "r+b") as f:
        f.seek(at)
        f.write(b"\x00" * 100)
    broker.start()

    records, errors = consume(broker, 0, RECORDS)
    assert records == expected(range(first_bad)), "every record before the damage is served"
    assert errors, f"no error event within {ERROR_EVENT_WITHIN_S} s: the consumer stalled"
    assert errors[0].code() == confluent_kafka.KafkaError.INVALID_MSG == 2, errors[
        0
    ]  # CORRUPT_MESSAGE

    # Past the damage every intact record is served again.
    records, errors = consume(broker, last_bad + 1, RECORDS)
    assert errors == [], (damaged, broker.log_tail())
    assert records == expected(range(last_bad + 1, RECORDS))

    log = broker.log_path.read_text(errors="replace")
    lines = [line for line in log.splitlines() if "ERROR" in line and str(victim) in line]
    assert len(lines) == 1, lines  # once, not once per fetch
    assert f"corrupt data at byte {damaged[0][0]}" in lines[0]
    assert broker.process is not None and broker.process.poll() is None
