"""Transactional produce and read_committed consume, per broker, in the same run.

Issue 18 asks for transactional produce throughput with 100-record and 10,000-record
transactions and for read_committed consume, as ratios against Apache Kafka. For each target
this script starts a fresh single node, creates one topic of ``--partitions`` partitions and,
with a confluent-kafka transactional producer (``enable.idempotence``, acks=all):

* **produce**: after one untimed warm-up transaction of one record, writes ``--records`` records of 100 B per transaction size, every transaction
  committed; records/s and transactions/s are measured from ``begin_transaction`` of the first
  to the return of ``commit_transaction`` of the last;
* **mixed**: then one more pass of 100-record transactions where every ``--abort-every``-th
  transaction is aborted, so the log holds aborted records and markers;
* **consume**: reads the whole topic from offset 0 once with ``isolation.level``
  ``read_committed`` and once ``read_uncommitted``, counting the records each returns (the
  committed count must match what was committed: the script fails otherwise).

    python -m benchmarks.omb.transactions --targets kafka,pydmq --records 200000

One target runs at a time (fresh data, free loopback ports); compare the ratios of one run.
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

TOPIC = "txn-bench"
RECORD_SIZE = 100


@dataclass(frozen=True, slots=True)
class Figure:
    target: str
    measure: str
    records: int
    seconds: float
    transactions: int = 0

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


def _producer(bootstrap: str, transactional_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 3,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()  # warm-up, not timed: one committed record on partition 0
    producer.produce(TOPIC, b"warm-up", partition=0)
    producer.commit_transaction(60)
    return producer


def _send(producer: Any, partitions: int, count: int, value: bytes, start: int) -> None:
    for i in range(start, start + count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)


def produce(target: str, bootstrap: str, partitions: int, records: int, per_txn: int) -> Figure:
    """``records`` records in committed transactions of ``per_txn`` records each."""
    producer = _producer(bootstrap, f"bench-{per_txn}-{time.monotonic_ns()}")
    value = os.urandom(RECORD_SIZE)
    transactions = max(1, records // per_txn)
    started = time.perf_counter()
    for txn in range(transactions):
        producer.begin_transaction()
        _send(producer, partitions, per_txn, value, txn * per_txn)
        producer.commit_transaction(60)
    seconds = time.perf_counter() - started
    return Figure(target, f"produce {per_txn}/txn", transactions * per_txn, seconds, transactions)


def produce_mixed(
    target: str, bootstrap: str, partitions: int, records: int, abort_every: int
) -> tuple[Figure, int]:
    """100-record transactions, every ``abort_every``-th aborted; returns the committed count."""
    producer = _producer(bootstrap, f"bench-mixed-{time.monotonic_ns()}")
    value = os.urandom(RECORD_SIZE)
    transactions = max(1, records // 100)
    committed = 0
    started = time.perf_counter()
    for txn in range(transactions):
        producer.begin_transaction()
        _send(producer, partitions, 100, value, txn * 100)
        if (txn + 1) % abort_every == 0:
            producer.flush(60)  # the aborted records reach the log before the marker
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += 100
    seconds = time.perf_counter() - started
    return Figure(target, "produce mixed", transactions * 100, seconds, transactions), committed


def consume(target: str, bootstrap: str, partitions: int, isolation: str, expected: int) -> Figure:
    """Read every partition from offset 0 to its end for ``isolation``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-bench-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
            "queued.min.messages": 500_000,
            "log_level": 3,
        }
    )
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen = 0
        at_end: set[int] = set()
        started = last = time.perf_counter()
        while len(at_end) < partitions and time.perf_counter() - started < 300:
            for message in consumer.consume(10_000, 0.1):
                error = message.error()
                if error is None:
                    seen += 1
                    last = time.perf_counter()
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(int(message.partition() or 0))
    finally:
        consumer.close()
    if isolation == "read_committed" and seen != expected:
        raise RuntimeError(f"{target}: read_committed returned {seen} records, {expected} expected")
    return Figure(target, f"consume {isolation}", seen, last - started)


def run_target(
    name: str, records: int, partitions: int, sizes: list[int], abort_every: int, workdir: Path
) -> list[Figure]:
    target = make_target(name, 1, workdir / name)
    target.start()
    try:
        create_topic(target.bootstrap, TOPIC, partitions, 1)
        figures = [produce(name, target.bootstrap, partitions, records, size) for size in sizes]
        mixed, committed = produce_mixed(name, target.bootstrap, partitions, records, abort_every)
        figures.append(mixed)
        warm_ups = len(figures)  # one committed record per producer
        committed += sum(f.records for f in figures[:-1]) + warm_ups
        total = sum(f.records for f in figures) + warm_ups
        figures.append(consume(name, target.bootstrap, partitions, "read_committed", committed))
        figures.append(consume(name, target.bootstrap, partitions, "read_uncommitted", total))
        return figures
    finally:
        target.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kafka,pydmq")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--sizes", default="100,10000", help="records per transaction")
    parser.add_argument("--abort-every", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    names = args.targets.split(",")
    results: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="txn-bench-") as tmp:
        for name in names:
            print(f"== {name}", file=sys.stderr, flush=True)
            results += run_target(
                name, args.records, args.partitions, sizes, args.abort_every, Path(tmp)
            )
    measures = list(dict.fromkeys(r.measure for r in results))
    print("| measure | " + " | ".join(f"{n} records/s" for n in names) + " | ratio |")
    print("|---|" + "---|" * (len(names) + 1))
    for measure in measures:
        rates = {r.target: r.records_per_s for r in results if r.measure == measure}
        cells = " | ".join(f"{rates.get(n, 0):,.0f}" for n in names)
        ratio = ""
        if "kafka" in rates and "pydmq" in rates and rates["kafka"]:
            ratio = f"{rates['pydmq'] / rates['kafka']:.2f}x"
        print(f"| {measure} | {cells} | {ratio} |")
    for r in results:
        print(json.dumps({**asdict(r), "records_per_s": round(r.records_per_s)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
