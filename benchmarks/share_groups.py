"""Share group (KIP-932) consumption: how fast confluent-kafka's ShareConsumer drains a
one-partition topic through pydmq, with one and with two consumers in the group.

An embedded broker (data on a temporary directory); per round a fresh topic of N records of
one size, produced with confluent-kafka, then read by 1 or 2 ShareConsumers (implicit
acknowledgement: each poll accepts the previous one's records) until every record was
delivered. Prints records/s per consumer count (medians over the rounds) and how the records
were split between the consumers; nothing is asserted.

    python benchmarks/share_groups.py                    # 20,000 x 100 B, 3 rounds
    python benchmarks/share_groups.py --records 50000 --rounds 5
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data, EmbeddedBroker(data) as broker:
        for consumers in (1, 2):
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


if __name__ == "__main__":
    main()
