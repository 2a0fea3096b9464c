"""Log compaction seen from outside, pydmq against Apache Kafka's cleaner, in the same run.

For each target this script starts a fresh single node with its default cleaner settings
(``log.cleaner.backoff.ms`` 15 s, one cleaner thread on both), creates one compacted topic
(``segment.bytes`` 1 MiB, ``min.cleanable.dirty.ratio`` ``--dirty-ratio``), writes
``--records`` updates of 100 B over ``--keys`` keys as fast as acks=all allows, then samples
the size of the partition's segment files every half second for ``--watch`` seconds. It prints:

* the produce rate,
* the partition's size when the last write was acknowledged, the smallest size seen, and the
  seconds until the size first came within 10 % of that smallest size (cleaning done),
* a read of the whole topic after the watch: how many records are left and whether each key's
  last value is the one written last (the script fails otherwise).

    python -m benchmarks.omb.compaction --targets kafka,pydmq --records 400000 --keys 1000

One target runs at a time (fresh data, free loopback ports); compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.omb.targets import create_topic, make_target

TOPIC = "compact-bench"
VALUE_SIZE = 100


@dataclass(frozen=True, slots=True)
class CompactionRun:
    target: str
    records: int
    produce_seconds: float
    bytes_at_end_of_produce: int
    smallest_bytes: int
    seconds_to_clean: float
    records_left: int

    @property
    def produce_rate(self) -> float:
        return self.records / self.produce_seconds if self.produce_seconds > 0 else 0.0


def _create_compacted_topic(bootstrap: str, dirty_ratio: float) -> None:
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(1024 * 1024),
        "min.cleanable.dirty.ratio": str(dirty_ratio),
    }
    create_topic(bootstrap, TOPIC, 1, 1, configs)


def _value(key: int, update: int) -> bytes:
    return f"{key}:{update}:".encode().ljust(VALUE_SIZE, b"x")


def _produce(bootstrap: str, records: int, keys: int) -> float:
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
    started = time.perf_counter()
    for i in range(records):
        key = i % keys
        while True:
            try:
                producer.produce(TOPIC, _value(key, i // keys), key=b"k%d" % key, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records were not acknowledged")
    return time.perf_counter() - started


def _partition_bytes(data_root: Path) -> int:
    """The bytes of the partition's live segment files (``*.log``): Kafka keeps a cleaned
    segment as ``.deleted`` for ``file.delete.delay.ms`` and preallocates sparse indexes, so
    the directory's size says nothing about what compaction left."""
    dirs = [p for p in data_root.rglob(f"{TOPIC}-0") if p.is_dir()]
    return sum(f.stat().st_size for d in dirs for f in d.glob("*.log") if f.is_file())


def _watch(data_root: Path, seconds: float) -> tuple[int, float]:
    """Sample the partition size; the smallest size and when it first came within 10 %."""
    samples: list[tuple[float, int]] = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        samples.append((time.monotonic() - started, _partition_bytes(data_root)))
        time.sleep(0.5)
    smallest = min(size for _, size in samples)
    done = next(at for at, size in samples if size <= smallest * 1.1)
    return smallest, done


def _read_back(bootstrap: str, records: int, keys: int) -> int:
    """Read the topic to its end; check each key's last value; the number of records read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"compact-bench-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    latest: dict[bytes, bytes] = {}
    read = 0
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 120
        at_end = False
        while not at_end and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.2):
                error = message.error()
                if error is None:
                    read += 1
                    latest[message.key() or b""] = message.value() or b""
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end = True
    finally:
        consumer.close()
    updates = records // keys
    for key in range(keys):
        last_update = updates if key < records % keys else updates - 1
        if latest.get(b"k%d" % key) != _value(key, last_update):
            raise RuntimeError(f"key k{key}: last value {latest.get(b'k%d' % key)!r} is wrong")
    return read


def run_target(
    name: str, records: int, keys: int, dirty_ratio: float, watch: float, workdir: Path
) -> CompactionRun:
    target = make_target(name, 1, workdir / name)
    target.start()
    try:
        _create_compacted_topic(target.bootstrap, dirty_ratio)
        seconds = _produce(target.bootstrap, records, keys)
        at_end = _partition_bytes(workdir / name)
        smallest, done = _watch(workdir / name, watch)
        left = _read_back(target.bootstrap, records, keys)
        return CompactionRun(name, records, seconds, at_end, smallest, done, left)
    finally:
        target.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kafka,pydmq")
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--keys", type=int, default=1_000)
    parser.add_argument("--dirty-ratio", type=float, default=0.5)
    parser.add_argument("--watch", type=float, default=60.0, help="seconds to sample the size")
    args = parser.parse_args(argv)
    results: list[CompactionRun] = []
    with tempfile.TemporaryDirectory(prefix="compact-bench-") as tmp:
        for name in args.targets.split(","):
            print(f"== {name}", file=sys.stderr, flush=True)
            results.append(
                run_target(name, args.records, args.keys, args.dirty_ratio, args.watch, Path(tmp))
            )
    print(
        "| target | produce rec/s | MiB after produce | smallest MiB | s to clean | records left |"
    )
    print("|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r.target} | {r.produce_rate:,.0f} | {r.bytes_at_end_of_produce / 2**20:.1f} "
            f"| {r.smallest_bytes / 2**20:.2f} | {r.seconds_to_clean:.1f} | {r.records_left:,} |"
        )
    for r in results:
        print(json.dumps({**asdict(r), "produce_rate": round(r.produce_rate)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
