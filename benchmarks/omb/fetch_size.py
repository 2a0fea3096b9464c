"""How the size of fetch responses sets a librdkafka consumer's speed, per broker.

The goals run read 100 B records from 16 partitions 0.81x as fast from pydmq as from Tansu,
with the client's defaults (``max.partition.fetch.bytes`` 1 MiB). pydmq and Apache Kafka fill
every partition up to that limit, so one response carries about 14 MB; Tansu answers with
about 5 MB. This script writes the same records to each target, then reads them back from
offset 0 with a confluent-kafka consumer once per ``max.partition.fetch.bytes`` value, and
prints records/s with librdkafka's own count of Fetch requests and bytes received.

    python -m benchmarks.omb.fetch_size --targets pydmq,tansu,kafka --records 3000000 \\
        --partition-bytes 1048576,262144 --rounds 2

One target runs at a time (fresh data, free loopback ports); the figures to compare are the
ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.omb.targets import create_topic, make_target

TOPIC = "fetch-size"
PARTITIONS = 16
RECORD_SIZE = 100


@dataclass(frozen=True, slots=True)
class ConsumeRound:
    target: str
    partition_bytes: int
    records: int
    seconds: float
    fetches: int
    received_mb: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_fetch(self) -> float:
        return self.received_mb / self.fetches if self.fetches else 0.0


def fill(bootstrap: str, records: int) -> None:
    """``records`` random 100 B values, round-robin over the partitions, acks=all."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "log_level": 3,
        }
    )
    value = os.urandom(RECORD_SIZE)
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not acknowledged")


def consume(target: str, bootstrap: str, records: int, partition_bytes: int) -> ConsumeRound:
    """Read every record from offset 0; librdkafka's statistics give fetches and bytes."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    stats: list[dict[str, Any]] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fetch-size-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": partition_bytes,
            "queued.min.messages": 500_000,
            "statistics.interval.ms": 200,
            "stats_cb": lambda text: stats.append(json.loads(text)),
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        seen = 0
        started = last = time.perf_counter()
        while seen < records and time.perf_counter() - started < 180:
            messages = consumer.consume(10_000, 0.1)
            if messages:
                seen += sum(1 for m in messages if m.error() is None)
                last = time.perf_counter()
        consumer.poll(0.5)  # one more statistics callback
    finally:
        consumer.close()
    fetches = 0
    received = 0
    for broker in (stats[-1] if stats else {}).get("brokers", {}).values():
        if broker.get("nodeid", -1) >= 0:
            fetches += int(broker.get("req", {}).get("Fetch", 0))
            received += int(broker.get("rxbytes", 0))
    return ConsumeRound(target, partition_bytes, seen, last - started, fetches, received / 1e6)


def run_target(
    name: str, records: int, partition_bytes: list[int], rounds: int, workdir: Path
) -> list[ConsumeRound]:
    target = make_target(name, 1, workdir / name)
    target.start()
    try:
        create_topic(target.bootstrap, TOPIC, PARTITIONS, 1)
        fill(target.bootstrap, records)
        return [
            consume(name, target.bootstrap, records, size)
            for _ in range(rounds)
            for size in partition_bytes
        ]
    finally:
        target.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="pydmq,tansu,kafka")
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--partition-bytes", default="1048576,262144")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.partition_bytes.split(",")]
    results: list[ConsumeRound] = []
    with tempfile.TemporaryDirectory(prefix="fetch-size-") as tmp:
        for name in args.targets.split(","):
            print(f"== {name}", file=sys.stderr, flush=True)
            results += run_target(name, args.records, sizes, args.rounds, Path(tmp))
    print("| target | max.partition.fetch.bytes | records/s (median) | fetches | MB per fetch |")
    print("|---|---|---|---|---|")
    for name in args.targets.split(","):
        for size in sizes:
            mine = sorted(
                (r for r in results if r.target == name and r.partition_bytes == size),
                key=lambda r: r.records_per_s,
            )
            if not mine:
                continue
            middle = mine[len(mine) // 2]
            print(
                f"| {name} | {size:,} | {middle.records_per_s:,.0f} | {middle.fetches} "
                f"| {middle.mb_per_fetch:.1f} |"
            )
    for r in results:
        print(json.dumps({**asdict(r), "records_per_s": round(r.records_per_s)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
