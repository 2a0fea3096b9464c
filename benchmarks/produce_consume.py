"""Produce/consume benchmark driven by confluent-kafka (librdkafka), with same-run references.

Starts a pydmq broker process (or uses --bootstrap), then for each record size and acks
setting: produces N records to a fresh 1-partition topic as fast as librdkafka goes, reports
records/s, MB/s and produce latency p50/p99 (delivery-report time minus enqueue time), then
consumes them back and reports records/s and MB/s. In the same run it measures the raw
loopback ceiling (a trivial socket sink) so figures compare by ratio on noisy machines, and
the broker's start-up time and RSS (idle and after load).

    python benchmarks/produce_consume.py                 # defaults: 1,000,000 x 100 B, 200,000 x 1 KB
    python benchmarks/produce_consume.py --records 200000 --sizes 100 --acks 1
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import confluent_kafka as ck

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import (  # noqa: E402
    DeliveryTally,
    bulk_producer_config,
    produce_chunked,
    spawn_serve,
    wait_listening,
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str, float]:
    env = {
        **os.environ,
        "MALLOC_MMAP_THRESHOLD_": "33554432",
        "MALLOC_TRIM_THRESHOLD_": "134217728",
    }
    proc, port, started = spawn_serve([sys.executable, "-m", "pydmq"], data_dir, env)
    startup = wait_listening(proc, port, started, poll_s=0.005)
    return proc, f"127.0.0.1:{port}", startup


def loopback_ceiling(total_bytes: int = 2 * 1024**3, chunk: int = 1024 * 1024) -> float:
    """MB/s a trivial Python socket sink reads over loopback."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = 0

    def sink() -> None:
        nonlocal received
        conn, _ = server.accept()
        buf = bytearray(chunk)
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            received += n
        conn.close()

    thread = threading.Thread(target=sink)
    thread.start()
    payload = b"x" * chunk
    client = socket.create_connection(("127.0.0.1", port))
    started = time.perf_counter()
    sent = 0
    while sent < total_bytes:
        client.sendall(payload)
        sent += chunk
    client.close()
    thread.join()
    elapsed = time.perf_counter() - started
    server.close()
    return received / elapsed / 1e6


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict[str, float]:
    rng = random.Random(42)
    payloads = [rng.randbytes(size) for _ in range(64)]
    producer = ck.Producer(bulk_producer_config(bootstrap, acks))
    tally = DeliveryTally()
    producer.produce(topic, b"warmup")
    producer.flush(30)
    left, elapsed = produce_chunked(producer, topic, payloads, count, tally, flush_timeout=120)
    latencies = sorted(tally.latencies)
    return {
        "records_s": count / elapsed,
        "mb_s": count * size / elapsed / 1e6,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else float("nan"),
        "errors": tally.errors + left,
    }


def _produce_worker(args: tuple[str, str, int, int, str]) -> dict[str, float]:
    return produce(*args)


def produce_parallel(
    bootstrap: str, topic: str, count: int, size: int, acks: str, producers: int
) -> dict[str, float]:
    """``producers`` processes write ``count`` records in total to the same partition."""
    if producers <= 1:
        return produce(bootstrap, topic, count, size, acks)
    import multiprocessing

    share = count // producers
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(producers) as pool:
        results = pool.map(_produce_worker, [(bootstrap, topic, share, size, acks)] * producers)
    elapsed = time.perf_counter() - started
    total = share * producers
    return {
        "records_s": total / elapsed,
        "mb_s": total * size / elapsed / 1e6,
        "p50_ms": max(r["p50_ms"] for r in results),
        "p99_ms": max(r["p99_ms"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }


def consume(bootstrap: str, topic: str, count: int, size: int) -> dict[str, float]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
            "queued.min.messages": 1000000,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 120
    while seen < count and time.perf_counter() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if not msg.error():
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"records_s": seen / elapsed, "mb_s": seen * size / elapsed / 1e6, "seen": seen}


def consume_kcat(bootstrap: str, topic: str, count: int, size: int) -> dict[str, float]:
    """The same read with kcat (C, no Python per record): the broker's fetch path, not the client's."""
    import shutil

    if shutil.which("kcat") is None:
        return {"records_s": float("nan"), "mb_s": float("nan"), "seen": 0}
    started = time.perf_counter()
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "\\n",
            "-X",
            "fetch.max.bytes=52428800",
            "-X",
            "queued.min.messages=1000000",
        ],
        capture_output=True,
        timeout=300,
        check=False,
    ).stdout
    elapsed = time.perf_counter() - started
    seen = out.count(b"\n")
    return {"records_s": seen / elapsed, "mb_s": seen * size / elapsed / 1e6, "seen": seen}


def consume_raw(bootstrap: str, topic: str, count: int, size: int) -> dict[str, float]:
    """Fetch with our own protocol client and only walk batch headers: the broker's fetch
    throughput without a client's per-record work (the ceiling the clients above approach)."""
    from pydmq.client import KafkaClient
    from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
    from pydmq.protocol.records import iter_batch_headers

    with KafkaClient(bootstrap) as client:
        topic_id = client.topic_id(topic)
        offset = 0
        seen = 0
        nbytes = 0
        started = time.perf_counter()
        deadline = started + 120
        while seen < count and time.perf_counter() < deadline:
            request = FetchRequest(
                replica_id=-1,
                max_wait=500,
                min_bytes=1,
                max_bytes=52428800,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    FetchTopic(
                        topic=topic,
                        topic_id=topic_id,
                        partitions=[
                            FetchPartition(
                                partition=0,
                                fetch_offset=offset,
                                partition_max_bytes=10485760,
                                current_leader_epoch=-1,
                                log_start_offset=-1,
                            )
                        ],
                    )
                ],
            )
            response = client.send(1, request)
            records = response.responses[0].partitions[0].records
            if not records:
                continue
            nbytes += len(records)
            for header in iter_batch_headers(records):
                if header.last_offset >= offset:
                    seen += header.last_offset + 1 - max(offset, header.base_offset)
                    offset = header.last_offset + 1
        elapsed = time.perf_counter() - started
    return {"records_s": seen / elapsed, "mb_s": nbytes / elapsed / 1e6, "seen": seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--records", type=int, default=0, help="records per run (default by size)")
    parser.add_argument("--acks", default="1,all")
    parser.add_argument(
        "--producers",
        type=int,
        default=1,
        help="producer processes writing to the partition at once (wall-clock aggregate)",
    )
    args = parser.parse_args()

    print(f"loopback ceiling (Python socket sink): {loopback_ceiling():,.0f} MB/s")
    with tempfile.TemporaryDirectory(prefix="pydmq-bench-") as data_dir:
        proc = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            proc, bootstrap, startup = start_broker(data_dir)
            time.sleep(0.5)
            print(
                f"broker start-up (exec to listening): {startup:.3f} s; idle RSS {rss_mb(proc.pid):.1f} MB"
            )
        try:
            for size in [int(s) for s in args.sizes.split(",")]:
                count = args.records or (1_000_000 if size <= 100 else 200_000)
                for acks in args.acks.split(","):
                    topic = f"bench-{size}-{acks}-{uuid.uuid4().hex[:6]}"
                    p = produce_parallel(bootstrap, topic, count, size, acks, args.producers)
                    c = consume(bootstrap, topic, count, size)
                    k = consume_kcat(bootstrap, topic, count, size)
                    r = consume_raw(bootstrap, topic, count, size)
                    rss = f"{rss_mb(proc.pid):.0f} MB" if proc else "n/a"
                    print(
                        f"{size:>5} B acks={acks:<3} produce {p['records_s']:>11,.0f} rec/s "
                        f"{p['mb_s']:>7.1f} MB/s p50 {p['p50_ms']:7.2f} ms p99 {p['p99_ms']:7.2f} ms "
                        f"errors {p['errors']:.0f} | consume {c['records_s']:>11,.0f} rec/s "
                        f"{c['mb_s']:>7.1f} MB/s ({c['seen']:.0f}) | kcat consume "
                        f"{k['records_s']:>11,.0f} rec/s {k['mb_s']:>7.1f} MB/s ({k['seen']:.0f}) "
                        f"| raw fetch {r['records_s']:>11,.0f} rec/s {r['mb_s']:>7.1f} MB/s "
                        f"| broker RSS {rss}",
                        flush=True,
                    )
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
