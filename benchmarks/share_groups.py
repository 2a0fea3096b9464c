"""Share group (KIP-932) consumption, pydmq beside the reference Kafka 4.4 in the same run:
how fast confluent-kafka's ShareConsumers drain a topic through a share group of 1, 4 and 16
consumers, on one partition and on 16, and how long an idle group takes to deliver a record.

Each target is a fresh single node process (``pydmq serve``, or Kafka 4.4 from compat/kafka
with its share coordinator's topic at replication factor 1), data on a temporary directory.
Per round: a fresh topic and group; the consumers subscribe, and warm-up records are produced
to each partition until each partition delivered one (a group starts at the log end, Kafka's
``share.auto.offset.reset=latest``); then N records of one size are produced (confluent-kafka,
acks=all) and timed from the first poll until every record was delivered (implicit
acknowledgement: each poll accepts the previous one's records). One Python thread polls the
consumers in turn, the same for both targets. Prints records/s (median over the rounds) per
target and shape, the pydmq/Kafka ratio, and how the records were split; asserts nothing.

Then the latency of an idle group: one record produced at a time (acks=all, flushed) while one
ShareConsumer waits in ``poll()``; produce call to delivery, p50/p99 over ``--latency-samples``.

    python benchmarks/share_groups.py                           # both targets, 20,000 x 100 B
    python benchmarks/share_groups.py --targets pydmq --rounds 1
    python benchmarks/share_groups.py --consumers 1,4 --partitions 1 --latency-samples 0
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import single_node
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

# Kafka 4.4 single node: its internal topics at replication factor 1 (share groups are on by
# default there). pydmq takes the same names.
PROPS = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
DRAIN_TIMEOUT_S = 180.0


def _topic(bootstrap: str, partitions: int) -> str:
    topic = f"share-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
            return topic
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _warm_up(producer: Producer, topic: str, partitions: int, members: list[ShareConsumer]) -> None:
    """Warm-up records until every partition delivered one: each share-partition exists and
    starts below every record produced afterwards."""
    waiting = set(range(partitions))
    deadline = time.monotonic() + 120
    while waiting:
        if time.monotonic() > deadline:
            raise TimeoutError(f"partitions {sorted(waiting)} never delivered a warm-up record")
        for p in waiting:
            producer.produce(topic, b"w", partition=p)
        producer.flush(10)
        for member in members:
            for m in member.poll(0.2):
                if m.error() is None and m.value() == b"w":
                    waiting.discard(m.partition())


def _round(
    bootstrap: str, records: int, size: int, consumers: int, partitions: int
) -> tuple[float, list[int]]:
    topic = _topic(bootstrap, partitions)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(consumers)
    ]
    for member in members:
        member.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    _warm_up(producer, topic, partitions, members)
    for member in members:  # what the warm-up left in flight
        member.poll(0.1)
    payload = b"x" * size
    for i in range(records):
        producer.produce(topic, payload, partition=i % partitions)
        producer.poll(0)
    producer.flush(60)
    counts = [0] * consumers
    started = time.perf_counter()
    deadline = started + DRAIN_TIMEOUT_S
    while sum(counts) < records and time.perf_counter() < deadline:
        for index, member in enumerate(members):
            counts[index] += sum(
                1 for m in member.poll(0.01) if m.error() is None and m.value() == payload
            )
    elapsed = time.perf_counter() - started
    for member in members:
        member.close()
    if sum(counts) < records:
        print(f"  (only {sum(counts)} of {records} delivered within {DRAIN_TIMEOUT_S:.0f} s)")
    return sum(counts) / elapsed, counts


def _latency(bootstrap: str, samples: int) -> list[float]:
    """Seconds from each produce call to its delivery to an idle ShareConsumer."""
    topic = _topic(bootstrap, 1)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}"})
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    _warm_up(producer, topic, 1, [consumer])
    for _ in range(20):  # drain what the warm-up left
        consumer.poll(0.05)
    latencies: list[float] = []
    for i in range(samples):
        value = f"s{i}".encode()
        time.sleep(0.02)  # idle: the consumer's ShareFetch is parked again
        sent = time.perf_counter()
        producer.produce(topic, value)
        producer.flush(10)
        deadline = sent + 10
        while time.perf_counter() < deadline:
            if any(m.error() is None and m.value() == value for m in consumer.poll(1.0)):
                latencies.append(time.perf_counter() - sent)
                break
    consumer.close()
    return latencies


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="pydmq,kafka")
    parser.add_argument("--consumers", type=_ints, default=[1, 4, 16])
    parser.add_argument("--partitions", type=_ints, default=[1, 16])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    targets = [t for t in args.targets.split(",") if t]
    rates: dict[tuple[str, int, int], float] = {}
    with tempfile.TemporaryDirectory() as work:
        for target in targets:
            with single_node(target, Path(work), PROPS) as bootstrap:
                for partitions in args.partitions:
                    for consumers in args.consumers if args.rounds > 0 else ():
                        results = [
                            _round(bootstrap, args.records, args.size, consumers, partitions)
                            for _ in range(args.rounds)
                        ]
                        rate = statistics.median(r for r, _ in results)
                        rates[(target, partitions, consumers)] = rate
                        print(
                            f"{target}: {partitions} partition(s), {consumers} consumer(s): "
                            f"{rate:,.0f} records/s (median of {args.rounds}; "
                            f"{args.records:,} x {args.size} B), per consumer "
                            f"{[counts for _, counts in results]}",
                            flush=True,
                        )
                if args.latency_samples > 0:
                    latencies = sorted(_latency(bootstrap, args.latency_samples))
                    p50 = latencies[len(latencies) // 2] * 1000
                    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
                    print(
                        f"{target}: idle group, produce to delivery: p50 {p50:.1f} ms, "
                        f"p99 {p99:.1f} ms ({len(latencies)} of {args.latency_samples} delivered)",
                        flush=True,
                    )
    if "pydmq" in targets and "kafka" in targets:
        print("\npydmq / Kafka, records/s:")
        for (target, partitions, consumers), rate in sorted(rates.items()):
            if target == "pydmq" and ("kafka", partitions, consumers) in rates:
                kafka = rates[("kafka", partitions, consumers)]
                print(
                    f"  {partitions:>2} partition(s), {consumers:>2} consumer(s): "
                    f"{rate:,.0f} / {kafka:,.0f} = {rate / kafka:.2f}"
                )


if __name__ == "__main__":
    main()
