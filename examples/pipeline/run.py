"""The example data pipeline, end to end, with one command:

    python examples/pipeline/run.py             # 20,000 events on a broker it starts itself
    python examples/pipeline/run.py --short     # the CI size (3,000 events)
    python examples/pipeline/run.py --bootstrap 127.0.0.1:9092   # on a running `pydmq serve`

1. generator.py: synthetic page-view/click events (JSON, out-of-order event times) into
   ``events`` with confluent-kafka;
2. job.py: a PySpark structured-streaming job (Kafka source, 10 s tumbling event-time windows
   per page with a watermark) writing to ``page-counts`` (Kafka sink) and to Parquet;
3. results.py: a confluent-kafka consumer that prints ``page-counts``.

Then it checks that the counts in the topic and in Parquet are exactly those the generator
produced (so they sum to the number of events) and prints a summary; the last line is
``SUMMARY {json}``. Exit status 0 when everything matches, 1 when not, 2 when something the
pipeline needs is missing (e.g. Spark's Kafka connector jars, see sparkenv.py).

Without ``--bootstrap`` it starts ``pydmq serve`` on a free loopback port with a temporary
data directory and stops it at the end. The Parquet output and the checkpoint stay in the
work directory (``--work-dir``, by default a new temporary one), whose path is printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import generator
import job
import results
import sparkenv
from kafka_util import end_offsets, ensure_topics

EVENTS_TOPIC = "events"
COUNTS_TOPIC = "page-counts"


def log(msg: str) -> None:
    print(msg, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="events -> Spark structured streaming (windowed counts) -> topic + Parquet"
    )
    ap.add_argument("--bootstrap", help="use this broker instead of starting one (host:port)")
    ap.add_argument("--events", type=int, help="number of events (default 20000; --short 3000)")
    ap.add_argument("--short", action="store_true", help="the small CI run")
    ap.add_argument("--work-dir", type=Path, help="output, checkpoint and scratch (kept)")
    ap.add_argument("--partitions", type=int, default=3, help="partitions of new topics")
    ap.add_argument("--window", type=int, default=10, help="tumbling window, seconds")
    ap.add_argument("--watermark", type=int, default=30, help="watermark delay, seconds")
    ap.add_argument("--max-skew", type=float, default=5.0, help="max event lateness, seconds")
    ap.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch")
    ap.add_argument("--timeout", type=float, default=600.0, help="streaming query bound, s")
    args = ap.parse_args(argv)
    if args.events is None:
        args.events = 3000 if args.short else 20_000
    if args.max_offsets_per_trigger is None:
        # Several micro-batches for the full run; one (plus the closing one) for --short.
        args.max_offsets_per_trigger = (
            args.events + 1 if args.short else max(1000, args.events // 4)
        )
    return args


def compare(
    name: str, rows: list[tuple[int, str, int]], expected: Counter[tuple[int, str]]
) -> list[str]:
    """Problems found in ``rows`` against the generator's expected counts."""
    problems: list[str] = []
    seen: Counter[tuple[int, str]] = Counter()
    for ms, page, count in rows:
        if (ms, page) in seen:
            problems.append(f"{name}: window {generator.iso(ms)} {page} written twice")
        seen[(ms, page)] += count
    for k in sorted(set(seen) | set(expected)):
        if seen[k] != expected[k]:
            problems.append(
                f"{name}: window {generator.iso(k[0])} {k[1]}: {seen[k]} != expected {expected[k]}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()
    try:
        sparkenv.connector_jars()  # fail early, before starting anything
    except sparkenv.SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="pydmq-pipeline-"))
    work = work.resolve()
    parquet_dir, checkpoint_dir = work / "page-counts.parquet", work / "checkpoint"
    # Each run starts from a fresh checkpoint: it reads only the events it generates.
    for d in (parquet_dir, checkpoint_dir):
        shutil.rmtree(d, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)

    broker = None
    spark = None
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
            log(f"== broker: {bootstrap} (given)")
        else:
            from pydmq.testing.process import BrokerProcess

            broker = BrokerProcess(work / "broker-data", log_path=work / "broker.log").start()
            bootstrap = broker.bootstrap
            log(f"== broker: started `pydmq serve` on {bootstrap} (pid {broker.pid})")

        ensure_topics(bootstrap, {EVENTS_TOPIC: args.partitions, COUNTS_TOPIC: args.partitions})
        events_start = end_offsets(bootstrap, EVENTS_TOPIC)
        counts_start = end_offsets(bootstrap, COUNTS_TOPIC)

        log(f"== 1. generator: {args.events} events into '{EVENTS_TOPIC}'")
        t = time.monotonic()
        gen = generator.generate(
            bootstrap,
            EVENTS_TOPIC,
            args.events,
            window_s=args.window,
            watermark_s=args.watermark,
            max_skew_s=args.max_skew,
        )
        log(
            f"   {gen.events} events ({gen.late} out of order, up to {args.max_skew:g} s late), "
            f"event time {generator.iso(gen.first_ms)} .. {generator.iso(gen.last_ms)}, "
            f"{time.monotonic() - t:.1f} s"
        )

        log(
            f"== 2. spark: {args.window} s tumbling windows per page, watermark "
            f"{args.watermark} s -> '{COUNTS_TOPIC}' + Parquet"
        )
        t = time.monotonic()
        spark = sparkenv.spark_session(work)
        log(f"   spark session ready in {time.monotonic() - t:.1f} s")
        stats = job.run_job(
            spark,
            bootstrap,
            source_topic=EVENTS_TOPIC,
            sink_topic=COUNTS_TOPIC,
            starting=events_start,
            parquet_dir=parquet_dir,
            checkpoint_dir=checkpoint_dir,
            window_s=args.window,
            watermark_s=args.watermark,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            timeout_s=args.timeout,
            log=log,
        )
        log(
            f"   {stats['input_rows']} records in {stats['batches']} micro-batches, "
            f"{stats['windows_written']} windows written, {stats['seconds']} s"
        )
        parquet_rows = job.read_parquet_counts(spark, parquet_dir)
        sparkenv.stop_spark(spark)
        spark = None

        log(f"== 3. consumer: '{COUNTS_TOPIC}'")
        kafka_rows = results.consume_counts(
            bootstrap, COUNTS_TOPIC, counts_start, end_offsets(bootstrap, COUNTS_TOPIC)
        )
        results.print_table(kafka_rows, generator.PAGES, out=log)
    except sparkenv.SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if spark is not None:
            sparkenv.stop_spark(spark)
        if broker is not None:
            broker.stop()
            shutil.rmtree(broker.data_dir, ignore_errors=True)

    problems = compare("kafka", kafka_rows, gen.expected) + compare(
        "parquet", parquet_rows, gen.expected
    )
    summary = {
        "events": gen.events,
        "kafka_windows": len(kafka_rows),
        "kafka_total": sum(c for _, _, c in kafka_rows),
        "parquet_windows": len(parquet_rows),
        "parquet_total": sum(c for _, _, c in parquet_rows),
        "expected_windows": len(gen.expected),
        "micro_batches": stats["batches"],
        "parquet_dir": str(parquet_dir),
        "seconds": round(time.monotonic() - t0, 1),
        "ok": not problems,
    }
    log("== summary")
    for p in problems[:20]:
        log(f"   MISMATCH {p}")
    log(
        f"   events produced: {gen.events}; counted in '{COUNTS_TOPIC}': "
        f"{summary['kafka_total']} over {summary['kafka_windows']} windows; in Parquet: "
        f"{summary['parquet_total']} over {summary['parquet_windows']} windows "
        f"-> {'OK' if summary['ok'] else 'MISMATCH'}"
    )
    log(f"   Parquet output and checkpoint kept in {work}")
    log("SUMMARY " + json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
