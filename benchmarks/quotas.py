"""The cost of client quotas: produce/consume throughput with none configured, and with high
quotas every client is under (so every request is measured but none is throttled).

Starts one pydmq broker process (or uses --bootstrap), then alternates rounds without quotas
and with the default user's ``producer_byte_rate``, ``consumer_byte_rate`` (10^15 B/s) and
``request_percentage`` (10^9 %) set, each round producing N records to a fresh 1-partition
topic with confluent-kafka and consuming them back; prints records/s per round and the
medians of each mode, and their ratio. Alternating rounds in one run (each mode first in
every other round) keep a noisy machine's drift out of the comparison.

    python benchmarks/quotas.py                       # 300,000 x 100 B, 3 rounds per mode
    python benchmarks/quotas.py --records 1000000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

import confluent_kafka.admin as cka  # noqa: E402
from benchmarks.produce_consume import consume, produce, start_broker  # noqa: E402

from pydmq.client import KafkaClient  # noqa: E402
from pydmq.protocol.messages import alter_client_quotas as aq  # noqa: E402

HIGH = {
    "producer_byte_rate": 1e15,
    "consumer_byte_rate": 1e15,
    "request_percentage": 1e9,
}


def set_quotas(bootstrap: str, on: bool) -> None:
    """Set (or remove) the high quotas on the default user: every client is under them."""
    request = aq.AlterClientQuotasRequest(
        entries=[
            aq.EntryData(
                entity=[aq.EntityData(entity_type="user", entity_name=None)],
                ops=[aq.OpData(key=k, value=v, remove=not on) for k, v in HIGH.items()],
            )
        ]
    )
    with KafkaClient(bootstrap, client_id="bench-quotas") as client:
        response = client.send(49, request)
    assert all(e.error_code == 0 for e in response.entries), response


def one_round(bootstrap: str, records: int, size: int) -> tuple[float, float]:
    topic = f"bench-quotas-{uuid.uuid4().hex[:8]}"
    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([cka.NewTopic(topic, 1, 1)])[topic].result(30)
    produced = produce(bootstrap, topic, records, size, "1")
    consumed = consume(bootstrap, topic, records, size)
    return produced["records_s"], consumed["records_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an already running broker")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    proc = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        proc, bootstrap, _ = start_broker(tempfile.mkdtemp(prefix="pydmq-bench-quotas-"))
    results: dict[str, list[tuple[float, float]]] = {"none": [], "high": []}
    try:
        for round_ in range(args.rounds):
            # ABBA: each mode runs first in every other round (the second run of a round
            # meets the first one's writeback)
            for mode in ("none", "high") if round_ % 2 == 0 else ("high", "none"):
                set_quotas(bootstrap, mode == "high")
                produced, consumed = one_round(bootstrap, args.records, args.size)
                results[mode].append((produced, consumed))
                print(
                    f"round {round_ + 1} {mode:>4}: produce {produced:>10,.0f} rec/s, "
                    f"consume {consumed:>10,.0f} rec/s",
                    flush=True,
                )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    medians = {
        mode: (
            statistics.median(p for p, _ in rows),
            statistics.median(c for _, c in rows),
        )
        for mode, rows in results.items()
    }
    print(f"\n{args.records:,} x {args.size} B, acks=1, medians of {args.rounds} rounds")
    print("| quotas | produce rec/s | consume rec/s |\n|---|---|---|")
    for mode, (produced, consumed) in medians.items():
        print(f"| {mode} | {produced:,.0f} | {consumed:,.0f} |")
    none, high = medians["none"], medians["high"]
    print(f"| high / none | {high[0] / none[0]:.3f} | {high[1] / none[1]:.3f} |")


if __name__ == "__main__":
    main()
