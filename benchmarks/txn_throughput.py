"""Transactional produce and read_committed consume throughput, pydmq against Apache Kafka 4.4
in the same run with the same client and settings (issue 18's benchmark).

For each broker (``--targets``, default ``kafka,pydmq``): a fresh single node on a free
loopback port (both at their defaults: transactions v2 finalized; librdkafka speaks v1 to
both), one topic of one partition. Then, with confluent-kafka (librdkafka; acks=all,
idempotent, 5 ms linger), for each transaction size (``--sizes``, default 100 and 10,000
records of ``--size`` bytes): transactions of that size are begun, filled and committed until
``--records`` records are committed, and a read_committed consumer reads them back from the
start of that size's topic. Prints records/s and transactions/s per cell, then the
pydmq/Kafka ratios.

    python benchmarks/txn_throughput.py --records 100000
    python benchmarks/txn_throughput.py --targets pydmq --records 20000   # no Java needed

One broker runs at a time; compare the ratios of one run (machines are noisy).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import create_topic, single_node  # noqa: E402

TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Cell:
    target: str
    txn_records: int
    produce_rps: float
    txn_per_s: float
    consume_rps: float


def produce_transactions(
    config: Mapping[str, str], topic: str, records: int, per_txn: int, payload: bytes
) -> float:
    """Seconds to commit ``records`` records in transactions of ``per_txn`` records."""
    producer = ck.Producer(
        {
            **config,
            "transactional.id": f"bench-{topic}",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_151,
        }
    )
    producer.init_transactions(60)
    started = time.perf_counter()
    committed = 0
    while committed < records:
        count = min(per_txn, records - committed)
        producer.begin_transaction()
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, payload, partition=0)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.commit_transaction(TIMEOUT_S)
        committed += count
    seconds = time.perf_counter() - started
    del producer  # destroyed now, before its broker stops
    return seconds


def consume_committed(config: Mapping[str, str], topic: str, records: int) -> float:
    """Seconds for a read_committed consumer to read ``records`` records from offset 0."""
    consumer = ck.Consumer(
        {
            **config,
            "group.id": f"bench-{topic}-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    got, started = 0, time.perf_counter()  # the first fetch (and its connection) counts
    deadline = time.monotonic() + TIMEOUT_S
    while got < records and time.monotonic() < deadline:
        batch = consumer.consume(10_000, 1.0)
        got += sum(1 for m in batch if m.error() is None)
    seconds = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"read_committed: {got} of {records} records")
    return seconds


def measure(target: str, bootstrap: str, sizes: list[int], records: int, size: int) -> list[Cell]:
    config = {"bootstrap.servers": bootstrap}
    payload = os.urandom(size)
    cells = []
    for per_txn in sizes:
        topic = f"txn-bench-{per_txn}"
        create_topic(config, topic)
        produced = produce_transactions(config, topic, records, per_txn, payload)
        consumed = consume_committed(config, topic, records)
        transactions = -(-records // per_txn)
        cells.append(
            Cell(target, per_txn, records / produced, transactions / produced, records / consumed)
        )
        print(
            f"{target:6} {per_txn:>6}-record transactions: produce {records / produced:>9,.0f} "
            f"rec/s ({transactions / produced:,.1f} txn/s), read_committed "
            f"{records / consumed:>9,.0f} rec/s",
            flush=True,
        )
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kafka,pydmq")
    parser.add_argument("--records", type=int, default=100_000, help="per transaction size")
    parser.add_argument("--sizes", default="100,10000", help="records per transaction")
    parser.add_argument("--size", type=int, default=1024, help="bytes per record")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="pydmq-txn-bench-"))
    results: dict[tuple[str, int], Cell] = {}
    for target in args.targets.split(","):
        with single_node(target, workdir, {}) as bootstrap:
            for cell in measure(target, bootstrap, sizes, args.records, args.size):
                results[(target, cell.txn_records)] = cell
    print(f"\n{args.records:,} records of {args.size} B per transaction size")
    print("| records/txn | Kafka produce | pydmq produce | ratio | Kafka read_committed "
          "| pydmq read_committed | ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for per_txn in sizes:
        kafka, pydmq = results.get(("kafka", per_txn)), results.get(("pydmq", per_txn))
        if kafka is None or pydmq is None:
            continue
        print(
            f"| {per_txn:,} | {kafka.produce_rps:,.0f} rec/s | {pydmq.produce_rps:,.0f} rec/s "
            f"| {pydmq.produce_rps / kafka.produce_rps:.2f}x | {kafka.consume_rps:,.0f} rec/s "
            f"| {pydmq.consume_rps:,.0f} rec/s | {pydmq.consume_rps / kafka.consume_rps:.2f}x |"
        )


if __name__ == "__main__":
    main()
