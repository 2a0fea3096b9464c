"""Share group (KIP-932) consumption: how fast confluent-kafka's ShareConsumer drains a
one-partition topic through pydmq, with one and with two consumers in the group.

An embedded broker (data on a temporary directory); per round a fresh topic of N records of
one size, produced with confluent-kafka, then read by 1 or 2 ShareConsumers (implicit
acknowledgement: each poll accepts the previous one's records) until every record was
delivered. Prints records/s per consumer count (medians over the rounds) and how the records
were split between the consumers; nothing is asserted.

Then the latency of an idle group: one record produced at a time (acks=all, flushed) while
one ShareConsumer waits in ``poll()``; the time from the produce call to its delivery, as
p50/p99 over ``--latency-samples``. An idle share consumer's ShareFetch is parked at the
broker, so this is what its long poll adds.

    python benchmarks/share_groups.py                    # 20,000 x 100 B, 3 rounds
    python benchmarks/share_groups.py --records 50000 --rounds 5
    python benchmarks/share_groups.py --latency-samples 500 --rounds 0   # latency only
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from pydmq.testing import EmbeddedBroker


def _round(bootstrap: str, records: int, size: int, consumers: int) -> tuple[float, list[int]]:
    topic = f"share-bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [
        ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(consumers)
    ]
    for member in members:
        member.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    # latest: the group starts at the log end at its first fetch; warm up until it did.
    warm = False
    while not warm:
        producer.produce(topic, b"w")
        producer.flush(10)
        for member in members:
            warm = warm or any(m.error() is None for m in member.poll(0.2))
    payload = b"x" * size
    for _ in range(records):
        producer.produce(topic, payload)
        producer.poll(0)
    producer.flush(30)
    counts = [0] * consumers
    started = time.perf_counter()
    deadline = started + 120
    while sum(counts) < records and time.perf_counter() < deadline:
        for index, member in enumerate(members):
            counts[index] += sum(
                1 for m in member.poll(0.05) if m.error() is None and m.value() == payload
            )
    elapsed = time.perf_counter() - started
    for member in members:
        member.close()
    return sum(counts) / elapsed, counts


def _latency(bootstrap: str, samples: int) -> list[float]:
    """Seconds from each produce call to its delivery to an idle ShareConsumer."""
    topic = f"share-latency-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{topic}"})
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    warm = False
    while not warm:
        producer.produce(topic, b"w")
        producer.flush(10)
        warm = any(m.error() is None for m in consumer.poll(0.2))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data, EmbeddedBroker(data) as broker:
        for consumers in (1, 2) if args.rounds > 0 else ():
            rates: list[float] = []
            splits: list[list[int]] = []
            for _ in range(args.rounds):
                rate, counts = _round(broker.bootstrap, args.records, args.size, consumers)
                rates.append(rate)
                splits.append(counts)
            print(
                f"{consumers} consumer(s): {statistics.median(rates):,.0f} records/s "
                f"(median of {args.rounds}; {args.records:,} x {args.size} B), "
                f"records per consumer {splits}"
            )
        if args.latency_samples > 0:
            latencies = sorted(_latency(broker.bootstrap, args.latency_samples))
            p50 = latencies[len(latencies) // 2] * 1000
            p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
            print(
                f"idle group, produce to delivery: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                f"({len(latencies)} of {args.latency_samples} delivered)"
            )


if __name__ == "__main__":
    main()
