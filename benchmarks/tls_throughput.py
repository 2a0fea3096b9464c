"""Produce and consume throughput over PLAINTEXT and over SSL, for pydmq and Apache Kafka 4.4,
in the same run and with the same settings.

For each broker (``--targets``, default ``kafka,pydmq``) and each security protocol
(PLAINTEXT, SSL; ``--mtls`` adds client certificates, ``ssl.client.auth=required``): a fresh
single node on a free loopback port, one topic of one partition, then with confluent-kafka
(librdkafka; 5 ms linger, 1 MB batches, no compression, acks=all) ``--records`` records of
``--size`` bytes produced and consumed back from offset 0. The same throwaway CA and server
certificate serve both brokers (a PKCS12 key store, a PEM trust store). Prints records/s and
MB/s per cell, then the ratios SSL/PLAINTEXT per broker and pydmq/Kafka per protocol.

    python benchmarks/tls_throughput.py --records 200000 --size 1024
    python benchmarks/tls_throughput.py --targets pydmq --records 50000    # no Java needed

One broker runs at a time; compare the ratios of one run (machines are noisy).
"""

from __future__ import annotations

import argparse
import os
import shutil
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

from benchmarks.common import (  # noqa: E402
    DeliveryTally,
    bulk_producer_config,
    create_topic,
    produce_chunked,
    single_node,
)

from pydmq.testing.tls import PASSWORD, Identity, TestCA  # noqa: E402

TOPIC = "tls-bench"


@dataclass(frozen=True)
class Cell:
    target: str
    protocol: str
    produce_rps: float
    consume_rps: float
    size: int

    def mb(self, rps: float) -> float:
        return rps * self.size / 1e6


def broker_security(protocol: str, ca: TestCA, server: Identity, mtls: bool) -> dict[str, str]:
    """The broker properties of ``protocol`` (Kafka's names: both brokers take the same)."""
    if protocol == "PLAINTEXT":
        return {}
    props = {
        "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(server.p12),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.pem),
    }
    if mtls:
        props["ssl.client.auth"] = "required"
    return props


def client_security(protocol: str, ca: TestCA, client: Identity, mtls: bool) -> dict[str, str]:
    if protocol == "PLAINTEXT":
        return {}
    config = {"security.protocol": "SSL", "ssl.ca.location": str(ca.pem)}
    if mtls:
        config |= {
            "ssl.certificate.location": str(client.cert_pem),
            "ssl.key.location": str(client.key_pem),
        }
    return config


def measure(config: Mapping[str, str], records: int, size: int) -> tuple[float, float]:
    """(produce records/s, consume records/s) of ``records`` records of ``size`` bytes."""
    create_topic(config, TOPIC)
    producer = ck.Producer({**bulk_producer_config(config["bootstrap.servers"], "all"), **config})
    payload = os.urandom(size)
    producer.produce(TOPIC, b"warm-up", partition=0)  # connection and metadata, not timed
    producer.flush(60)
    tally = DeliveryTally()
    left, seconds = produce_chunked(producer, TOPIC, [payload], records, tally, 300)
    if left or tally.errors:
        raise RuntimeError(f"produce: {left} undelivered, {tally.errors} failed")
    produce_rps = records / seconds
    del producer  # destroyed now, before its broker stops
    consumer = ck.Consumer(
        {
            **config,
            "group.id": f"tls-bench-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
        }
    )
    consumer.assign([ck.TopicPartition(TOPIC, 0, 1)])  # after the warm-up record
    got, started = 0, 0.0
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        batch = consumer.consume(10_000, 1.0)
        if batch and not started:
            started = time.perf_counter()
        got += sum(1 for m in batch if m.error() is None)
    seconds = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"consume: {got} of {records} records")
    return produce_rps, records / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kafka,pydmq")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--mtls", action="store_true", help="client certificates required")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pydmq-tls-bench-"))
    ca = TestCA(workdir / "certs")
    server, client = ca.issue("server"), ca.issue("client")
    cells: list[Cell] = []
    try:
        for target in args.targets.split(","):
            for protocol in ("PLAINTEXT", "SSL"):
                props = broker_security(protocol, ca, server, args.mtls)
                with single_node(target, workdir, props) as bootstrap:
                    config = {
                        "bootstrap.servers": bootstrap,
                        **client_security(protocol, ca, client, args.mtls),
                    }
                    produce_rps, consume_rps = measure(config, args.records, args.size)
                cells.append(Cell(target, protocol, produce_rps, consume_rps, args.size))
                print(
                    f"{target:6} {protocol:9} produce {produce_rps:10,.0f} rec/s "
                    f"({cells[-1].mb(produce_rps):7.1f} MB/s)  consume {consume_rps:10,.0f} "
                    f"rec/s ({cells[-1].mb(consume_rps):7.1f} MB/s)",
                    flush=True,
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(cells, args)


def report(cells: list[Cell], args: argparse.Namespace) -> None:
    by = {(c.target, c.protocol): c for c in cells}
    auth = "mTLS" if args.mtls else "SSL"
    print(f"\n{args.records:,} records of {args.size} B, acks=all, one partition ({auth}):")
    for target in sorted({c.target for c in cells}):
        plain, tls = by.get((target, "PLAINTEXT")), by.get((target, "SSL"))
        if plain and tls:
            print(
                f"  {target}: SSL/PLAINTEXT produce {tls.produce_rps / plain.produce_rps:.2f}, "
                f"consume {tls.consume_rps / plain.consume_rps:.2f}"
            )
    for protocol in ("PLAINTEXT", "SSL"):
        ours, theirs = by.get(("pydmq", protocol)), by.get(("kafka", protocol))
        if ours and theirs:
            print(
                f"  pydmq/Kafka over {protocol}: produce "
                f"{ours.produce_rps / theirs.produce_rps:.2f}, consume "
                f"{ours.consume_rps / theirs.consume_rps:.2f}"
            )


if __name__ == "__main__":
    main()
