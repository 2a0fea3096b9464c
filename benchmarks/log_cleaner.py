"""The log cleaner's throughput, and what a running cleaner costs produce latency.

1. Throughput: a segment-engine log of ``--mb`` MB (``--keys`` distinct keys, 100-byte values,
   batches of 50 records, ``--codec``) is generated in a temporary directory, then cleaned
   once by the real cleaner run inline (map, clean, write, swap): MB/s of batches read (the
   dirty section is read twice, once to map it and once to clean it: both counted) and
   written, and the log's size before and after.
2. Produce p99: ``pydmq serve`` with ``log.cleaner.enable`` false, then true; in each run a
   background producer updates a compacted topic at ``--rate`` records/s (``--keys`` keys,
   256 KiB segments, ``min.cleanable.dirty.ratio=0.01``: the cleaner works all the time) while
   a probe producer sends ``--probes`` records one at a time (acks=1) to another topic; the
   probe round-trip latencies are printed (p50, p99, max), with the cleanings the broker
   logged.

    python benchmarks/log_cleaner.py
    python benchmarks/log_cleaner.py --mb 256 --codec lz4 --probes 5000
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import CHILD_ENV, free_port, serve_command, wait_listening  # noqa: E402

from pydmq.cleaner.log_cleaner import clean_log, plan_cleaning  # noqa: E402
from pydmq.cleaner.offset_map import OffsetMap  # noqa: E402
from pydmq.cleaner.throttler import Throttler  # noqa: E402
from pydmq.engines.segment import SegmentStorageEngine  # noqa: E402
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers  # noqa: E402
from pydmq.storage.api import LogConfig, TopicPartition  # noqa: E402
from pydmq.storage.log import UnifiedLog  # noqa: E402

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MB = 1_000_000


def throughput(mb: int, keys: int, codec: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="pydmq-cleaner-bench-"))
    tp = TopicPartition("bench", 0)
    try:
        engine = SegmentStorageEngine(str(root))
        config = LogConfig(segment_bytes=8 * 1024 * 1024, retention_ms=-1, compact=True)
        log = engine.open_log(tp, config)
        rng = random.Random(1)
        value = b"v" * 100
        now = int(time.time() * 1000)
        while log.size_in_bytes < mb * MB:
            base = log.log_end_offset
            records = [
                SimpleRecord(b"key-%08d" % rng.randrange(keys), value, (), now) for _ in range(50)
            ]
            batch = build_batch(records, base_offset=base, compression=codec)
            log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        before = log.size_in_bytes
        unified = UnifiedLog(log)
        unified.update_high_watermark(log.log_end_offset)
        plan = plan_cleaning(tp, unified, now)
        assert plan is not None
        started = time.perf_counter()
        result = clean_log(plan, lambda fn: fn(), OffsetMap(128 * MB), Throttler(float("inf")), now)
        seconds = time.perf_counter() - started
        stats = result.stats
        print(
            f"throughput: {before / MB:.0f} MB log, {keys} keys, codec {codec}: cleaned in "
            f"{seconds:.2f} s; read {(stats.bytes_read + plan.dirty_bytes) / MB / seconds:.1f} MB/s"
            f" (map + clean), cleaned {stats.bytes_read / MB / seconds:.1f} MB/s of segments, "
            f"{stats.records_read / seconds / 1000:.0f} k records/s; "
            f"{before / MB:.1f} -> {log.size_in_bytes / MB:.1f} MB, "
            f"{result.groups_swapped} groups swapped"
        )
        engine.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def produce_p99(enable: bool, keys: int, probes: int, rate: int) -> tuple[list[float], int]:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    root = Path(tempfile.mkdtemp(prefix="pydmq-cleaner-p99-"))
    port = free_port()
    command = [
        *serve_command(),
        "serve",
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port}",
        "--log-dirs",
        str(root),
        "--http-listener",
        "http://127.0.0.1:0",
        "--log-level",
        "INFO",
        "--override",
        f"log.cleaner.enable={str(enable).lower()}",
        "--override",
        "log.cleaner.backoff.ms=100",
    ]
    started = time.perf_counter()
    log_path = root.with_suffix(".log")
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(command, env=CHILD_ENV, stdout=out, stderr=out)
    stop = threading.Event()
    try:
        wait_listening(proc, port, started, 0.05)
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        compacted = {
            "cleanup.policy": "compact",
            "internal.segment.bytes": str(256 * 1024),
            "min.cleanable.dirty.ratio": "0.01",
        }
        futures = admin.create_topics(
            [NewTopic("dirty", 1, 1, config=compacted), NewTopic("probe", 1, 1)]
        )
        for future in futures.values():
            future.result(30)

        def background() -> None:
            producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            rng = random.Random(2)
            value = b"v" * 100
            tick = 0.01
            per_tick = max(1, int(rate * tick))
            next_tick = time.perf_counter()
            while not stop.is_set():
                for _ in range(per_tick):
                    producer.produce("dirty", value, b"key-%08d" % rng.randrange(keys))
                producer.poll(0)
                next_tick += tick
                time.sleep(max(0.0, next_tick - time.perf_counter()))
            producer.flush(10)

        loader = threading.Thread(target=background)
        loader.start()
        time.sleep(2)  # the dirty topic fills its first segments
        probe = ck.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
        latencies: list[float] = []
        failures: list[object] = []

        def delivered(err: object, msg: object) -> None:
            if err is not None:
                failures.append(err)

        for i in range(probes):
            sent = time.perf_counter()
            probe.produce("probe", b"p%d" % i, on_delivery=delivered)
            if probe.flush(30):
                raise RuntimeError("a probe was not delivered within 30 s")
            latencies.append(time.perf_counter() - sent)
        if failures:
            raise RuntimeError(f"{len(failures)} probes failed: {failures[0]}")
        stop.set()
        loader.join()
        cleanings = log_path.read_text(errors="replace").count("pydmq.cleaner.manager: cleaned")
        return latencies, cleanings
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(root, ignore_errors=True)
        log_path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=int, default=64, help="log size to clean (MB)")
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys")
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--probes", type=int, default=2000, help="probe records per run")
    parser.add_argument("--rate", type=int, default=5000, help="background records/s")
    parser.add_argument("--skip-produce", action="store_true", help="throughput only")
    args = parser.parse_args()
    throughput(args.mb, args.keys, CODECS[args.codec])
    if args.skip_produce:
        return
    for enable in (False, True):
        latencies, cleanings = produce_p99(enable, args.keys, args.probes, args.rate)
        ms = sorted(x * 1000 for x in latencies)
        p99 = ms[int(len(ms) * 0.99) - 1]
        print(
            f"produce with log.cleaner.enable={str(enable).lower()} ({args.rate} records/s to "
            f"a compacted topic, {cleanings} cleanings): {len(ms)} probes, p50 "
            f"{statistics.median(ms):.2f} ms, p99 {p99:.2f} ms, max {ms[-1]:.2f} ms"
        )


if __name__ == "__main__":
    main()
