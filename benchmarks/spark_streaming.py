"""Spark structured streaming through pydmq and through the reference Apache Kafka, one run.

What it measures: the wall time a PySpark structured-streaming query takes to read a whole
topic of N records (default 1,000,000 x 100-byte values, 4 partitions) from a broker, for
pydmq and for the reference Apache Kafka of compat/kafka (a single KRaft node, started with
compat/kafka/start.sh) on the same machine, in the same run, with the same SparkSession.

    .venv/bin/python benchmarks/spark_streaming.py                    # the issue's figure
    .venv/bin/python benchmarks/spark_streaming.py --repeat 3         # medians of 3, alternating
    .venv/bin/python benchmarks/spark_streaming.py --records 20000 --repeat 1   # smoke run

How it runs:

1. Both brokers are started and stay up for the whole run; every fill and every Spark run
   talks to one broker while the other one sits idle. pydmq is ``python -m pydmq serve``
   (``pydmq.testing.process.BrokerProcess``, log level WARNING); Kafka is ``start.sh`` (JVM
   -Xmx1g, log level warn) through ``ReferenceKafka`` of tests/interop/differential_support.py.
   Both get the same broker settings (:data:`BROKER_PROPS`).
2. Fill: confluent-kafka creates the topic and produces N records (key ``key-<i>``, a 100-byte
   value from ``random.Random(SEED)``, partition ``i % P``; acks=1, linger.ms=5, 1 MiB
   batches, ``--compression``). The fill is timed on its own; it is not the Spark figure.
   Afterwards the high watermarks must add up to N.
3. Warm-up: the same streaming job on a small separate topic (5,000 records), twice per
   broker in ``--order``, so the JVM (class loading, JIT) is warm before the first measured
   run and neither broker gets the cold start. Not measured (the times are in the JSON).
4. Spark: ``readStream.format("kafka")`` with ``subscribe``, ``startingOffsets=earliest``,
   ``maxOffsetsPerTrigger`` unset (or ``--max-offsets``), trigger ``availableNow``, projected
   to ``partition, length(value)``; ``foreachBatch`` groups each micro-batch by partition and
   collects (rows, value bytes) per partition. Fresh checkpoint directory per run. The time is
   from ``writeStream.start()`` to the return of ``awaitTermination()``. The rows counted per
   partition must equal the high watermarks (an ERROR line and exit status 1 otherwise).
   With ``--repeat R`` the brokers alternate: ``--order`` on even rounds, reversed on odd ones.
   Session: local[2], 1 GiB driver, the connector jars of compat/spark (tests/interop's
   ``spark_session``).

How to read the output: one row per broker with the record count, the fill time, the median
Spark time, and Spark throughput as records/s and MB/s (MB = 10^6 bytes of keys + values, as
produced); then ``ratio pydmq/kafka`` = pydmq's Spark records/s over Kafka's (the issue asks
for >= 0.80). Versions (pyspark, Spark's Kafka connector and its kafka-clients, the Kafka
broker from the compat/kafka/dist jar names, pydmq's git commit) and the machine (nproc, load
average at start and end: high load means noisy figures) follow. The last line is one JSON
object with every figure. The script asserts nothing about speed. With a small ``--records``
the Spark time is mostly the fixed cost of a query (planning, offset look-ups, checkpoint
files; about the second warm-up time, ``warmup_seconds`` in the JSON), so only the default
size says anything about throughput; at load averages well above nproc, repeat (``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from pydmq.testing.process import BrokerProcess

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from benchmarks.omb.procfs import git_commit  # noqa: E402

from interop.differential_support import ReferenceKafka, wait_until_serving  # noqa: E402
from interop.spark_support import (  # noqa: E402
    check_versions,
    connector_jars,
    kafka_jar_versions,
    spark_session,
    stop_spark,
)

BROKERS = ("pydmq", "kafka")
SEED = 20240601
VALUE_SIZE = 100
WARMUP_RECORDS = 5_000
WARMUP_ROUNDS = 2  # the first query also pays for Spark's own start (planning code, JIT)
TOPIC = "spark-bench"
WARMUP_TOPIC = "spark-bench-warmup"
KAFKA_START_TIMEOUT = 240.0

# The same broker settings for both (Kafka property names).
BROKER_PROPS: dict[str, object] = {
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


class Broker(Protocol):
    @property
    def bootstrap(self) -> str: ...

    def stop(self) -> None: ...


class QuietBrokerProcess(BrokerProcess):
    """pydmq at log level WARNING, like the reference Kafka at ``warn``."""

    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "WARNING"]


@dataclass
class SparkRun:
    round: int
    seconds: float
    rows: int
    value_bytes: int
    batches: int
    ok: bool


@dataclass
class BrokerResult:
    name: str
    bootstrap: str
    start_seconds: float
    fill_seconds: float = 0.0
    fill_records_per_s: float = 0.0
    watermarks: dict[int, int] = field(default_factory=dict)
    warmup_seconds: list[float] = field(default_factory=list)
    runs: list[SparkRun] = field(default_factory=list)


# -- fill --------------------------------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    )
    futures[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            ready = all(p.leader >= 0 for p in meta.partitions.values())
            if ready:
                return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} not visible with {partitions} partitions on {bootstrap}")


def fill(bootstrap: str, topic: str, records: int, partitions: int, compression: str) -> float:
    """Produce the records; returns the seconds from the first produce() to flush()."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "batch.num.messages": 100_000,
            "compression.type": compression,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "enable.idempotence": False,
        }
    )
    rng = random.Random(SEED)
    started = time.perf_counter()
    for i in range(records):
        value = rng.randbytes(VALUE_SIZE)
        key = b"key-%d" % i
        while True:
            try:
                producer.produce(
                    topic, value=value, key=key, partition=i % partitions, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(300)
    elapsed = time.perf_counter() - started
    if left or errors:
        raise RuntimeError(f"fill of {topic}: {left} undelivered, errors {errors[:5]}")
    return elapsed


def payload_bytes(records: int) -> int:
    """Bytes of keys + values of the first ``records`` records (as produced)."""
    return records * VALUE_SIZE + sum(len(b"key-%d" % i) for i in range(records))


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "spark-bench-check",
            "enable.auto.commit": False,
        }
    )
    try:
        out: dict[int, int] = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            out[p] = high - low
        return out
    finally:
        consumer.close()


# -- the Spark job ----------------------------------------------------------------------------


def spark_run(
    spark: Any,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    max_offsets: int | None,
) -> tuple[float, dict[int, tuple[int, int]], int]:
    """One availableNow query over the whole topic: (seconds, {partition: (rows, value bytes)},
    micro-batches)."""
    from pyspark.sql import functions as F

    seen: dict[int, tuple[int, int]] = {}
    batches = 0

    def on_batch(batch: Any, _batch_id: int) -> None:
        nonlocal batches
        batches += 1
        grouped = batch.groupBy("partition").agg(
            F.count(F.lit(1)).alias("rows"), F.sum("len").alias("bytes")
        )
        for row in grouped.collect():
            rows, size = seen.get(row["partition"], (0, 0))
            seen[row["partition"]] = (rows + int(row["rows"]), size + int(row["bytes"] or 0))

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    frame = reader.load().select("partition", F.length("value").alias("len"))
    started = time.perf_counter()
    query = (
        frame.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"streaming query against {bootstrap} failed: {error}")
    return elapsed, seen, batches


# -- versions and machine ----------------------------------------------------------------------


def kafka_broker_version() -> str:
    jars = sorted((REPO / "compat" / "kafka" / "dist").glob("kafka_2.13-*.jar"))
    return jars[0].stem.removeprefix("kafka_2.13-") if jars else "unknown"


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return (out.stderr or out.stdout).splitlines()[0].strip()


def versions() -> dict[str, str]:
    import confluent_kafka
    import pyspark

    jars = kafka_jar_versions()
    return {
        "pyspark": pyspark.__version__,
        "spark_sql_kafka_connector": jars.get("spark-sql-kafka-0-10_2.13", "unknown"),
        "spark_kafka_clients": jars.get("kafka-clients", "unknown"),
        "kafka_broker": kafka_broker_version(),
        "pydmq_commit": git_commit(short=12),
        "confluent_kafka": first(confluent_kafka.version()),
        "librdkafka": first(confluent_kafka.libversion()),
        "java": java_version(),
        "python": platform.python_version(),
    }


def first(version: Any) -> str:
    """confluent-kafka's version()/libversion() give (str, int), or a bare str in some builds."""
    return str(version[0] if isinstance(version, tuple) else version)


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# -- the run -----------------------------------------------------------------------------------


def start_brokers(names: list[str], root: Path) -> tuple[dict[str, Broker], dict[str, float]]:
    brokers: dict[str, Broker] = {}
    started: dict[str, float] = {}
    t0: dict[str, float] = {}
    kafka: ReferenceKafka | None = None
    try:
        if "kafka" in names:  # the JVM starts while pydmq does
            t0["kafka"] = time.perf_counter()
            (root / "kafka").mkdir(parents=True, exist_ok=True)
            kafka = ReferenceKafka(BROKER_PROPS, root=root / "kafka").start()
            brokers["kafka"] = kafka
        if "pydmq" in names:
            t0["pydmq"] = time.perf_counter()
            pydmq = QuietBrokerProcess(
                root / "pydmq" / "data",
                overrides=BROKER_PROPS,
                log_path=root / "pydmq" / "broker.log",
            )
            brokers["pydmq"] = pydmq
            pydmq.start(60)
            wait_until_serving(pydmq.bootstrap, time.monotonic() + 60)
            started["pydmq"] = time.perf_counter() - t0["pydmq"]
        if kafka is not None:
            kafka.wait_ready(KAFKA_START_TIMEOUT)
            started["kafka"] = time.perf_counter() - t0["kafka"]
    except BaseException:
        stop_brokers(brokers)
        raise
    return brokers, started


def stop_brokers(brokers: dict[str, Broker]) -> None:
    for name, broker in brokers.items():
        try:
            broker.stop()
        except Exception as exc:  # keep stopping the others
            print(f"warning: stopping {name}: {exc}", file=sys.stderr)


def fmt_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--compression", choices=("none", "lz4"), default="none")
    parser.add_argument("--repeat", type=int, default=1, help="Spark runs per broker (median)")
    parser.add_argument(
        "--order", default="pydmq,kafka", help="broker order of round 0 (reversed on odd rounds)"
    )
    parser.add_argument("--only", choices=BROKERS, help="measure one broker only (no ratio)")
    parser.add_argument(
        "--max-offsets", type=int, default=None, help="maxOffsetsPerTrigger (default: unset)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    order = [x.strip() for x in args.order.split(",") if x.strip()]
    if sorted(order) != sorted(BROKERS):
        parser.error(f"--order must name {' and '.join(BROKERS)} once each")
    args.order = [b for b in order if args.only in (None, b)]
    if args.records < 1 or args.partitions < 1 or args.repeat < 1:
        parser.error("--records, --partitions and --repeat must be >= 1")
    return args


def on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(143)  # unwinds through the finally blocks: brokers and Spark stop


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    wall_start = time.perf_counter()
    load_start = load_average()
    check_versions()
    connector_jars()  # resolve (Maven) before any timing if compat/spark/jars is stale
    names: list[str] = args.order
    root = Path(tempfile.mkdtemp(prefix="pydmq-spark-bench-"))
    print(f"work dir {root}; brokers {', '.join(names)}; {args.records:,} records", flush=True)
    ok = True
    results: dict[str, BrokerResult] = {}
    brokers: dict[str, Broker] = {}
    spark: Any = None
    try:
        brokers, started = start_brokers(names, root)
        for name in names:
            results[name] = BrokerResult(name, brokers[name].bootstrap, started[name])
            print(f"{name}: up at {brokers[name].bootstrap} in {started[name]:.1f} s", flush=True)

        for name in names:
            bootstrap = brokers[name].bootstrap
            create_topic(bootstrap, TOPIC, args.partitions)
            res = results[name]
            res.fill_seconds = fill(
                bootstrap, TOPIC, args.records, args.partitions, args.compression
            )
            res.fill_records_per_s = args.records / res.fill_seconds
            res.watermarks = high_watermarks(bootstrap, TOPIC, args.partitions)
            if sum(res.watermarks.values()) != args.records:
                print(
                    f"ERROR: {name} holds {sum(res.watermarks.values())} records after the "
                    f"fill, expected {args.records}",
                    file=sys.stderr,
                )
                ok = False
            print(
                f"{name}: filled {args.records:,} records in {res.fill_seconds:.2f} s "
                f"({res.fill_records_per_s:,.0f} records/s)",
                flush=True,
            )

        spark = spark_session(root / "spark")
        checkpoints = root / "checkpoints"
        for name in names:  # warm-up topics: small, separate, never measured
            create_topic(brokers[name].bootstrap, WARMUP_TOPIC, args.partitions)
            fill(
                brokers[name].bootstrap,
                WARMUP_TOPIC,
                WARMUP_RECORDS,
                args.partitions,
                args.compression,
            )
        for wrnd in range(WARMUP_ROUNDS):
            for name in names:
                secs, _, _ = spark_run(
                    spark,
                    brokers[name].bootstrap,
                    WARMUP_TOPIC,
                    checkpoints / f"warmup-{name}-{wrnd}",
                    args.max_offsets,
                )
                results[name].warmup_seconds.append(secs)
                print(
                    f"{name}: warm-up {wrnd} ({WARMUP_RECORDS:,} records) {secs:.2f} s",
                    flush=True,
                )

        for rnd in range(args.repeat):
            order = names if rnd % 2 == 0 else names[::-1]
            for name in order:
                res = results[name]
                secs, seen, batches = spark_run(
                    spark,
                    res.bootstrap,
                    TOPIC,
                    checkpoints / f"{name}-{rnd}",
                    args.max_offsets,
                )
                rows = sum(r for r, _ in seen.values())
                run_ok = rows == args.records and {p: r for p, (r, _) in seen.items()} == {
                    p: n for p, n in res.watermarks.items() if n
                }
                if not run_ok:
                    print(
                        f"ERROR: Spark read {rows} records from {name} in round {rnd} "
                        f"(expected {args.records}); per partition {seen}, "
                        f"watermarks {res.watermarks}",
                        file=sys.stderr,
                    )
                    ok = False
                res.runs.append(
                    SparkRun(rnd, secs, rows, sum(b for _, b in seen.values()), batches, run_ok)
                )
                print(
                    f"{name}: round {rnd}: {rows:,} records in {secs:.2f} s "
                    f"({rows / secs:,.0f} records/s, {batches} micro-batch(es))",
                    flush=True,
                )
    finally:
        if spark is not None:
            stop_spark(spark)
        stop_brokers(brokers)
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    mb = payload_bytes(args.records) / 1e6
    summary: dict[str, Any] = {}
    table = [["broker", "records", "fill s", "spark s", "records/s", "MB/s", "runs"]]
    for name in names:
        res = results[name]
        secs = statistics.median(r.seconds for r in res.runs)
        summary[name] = {
            "bootstrap": res.bootstrap,
            "start_seconds": round(res.start_seconds, 3),
            "fill_seconds": round(res.fill_seconds, 3),
            "fill_records_per_s": round(res.fill_records_per_s, 1),
            "warmup_seconds": [round(x, 3) for x in res.warmup_seconds],
            "spark_seconds_median": round(secs, 3),
            "records_per_s": round(args.records / secs, 1),
            "mb_per_s": round(mb / secs, 3),
            "runs": [asdict(r) for r in res.runs],
        }
        table.append(
            [
                name,
                f"{args.records:,}",
                f"{res.fill_seconds:.2f}",
                f"{secs:.2f}",
                f"{args.records / secs:,.0f}",
                f"{mb / secs:.2f}",
                " ".join(f"{r.seconds:.2f}" for r in res.runs),
            ]
        )
    ratio: float | None = None
    if "pydmq" in summary and "kafka" in summary:
        ratio = summary["pydmq"]["records_per_s"] / summary["kafka"]["records_per_s"]
    load_end = load_average()
    info = versions()
    machine = {"nproc": os.cpu_count(), "load_start": load_start, "load_end": load_end}

    print()
    print(fmt_table(table))
    print(
        "spark s = median wall time from writeStream.start() to awaitTermination(); "
        f"MB = 10^6 bytes of keys + values ({mb:.1f} MB); measured one broker at a time, "
        "the other idle"
    )
    if ratio is not None:
        print(f"ratio pydmq/kafka (Spark records/s): {ratio:.3f}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    print(f"machine: nproc {machine['nproc']}, load average start {load_start} end {load_end}")
    if not ok:
        print("ERROR: record counts did not match (see above)")
    print(
        json.dumps(
            {
                "benchmark": "spark_streaming",
                "records": args.records,
                "partitions": args.partitions,
                "value_bytes": VALUE_SIZE,
                "payload_mb": round(mb, 3),
                "compression": args.compression,
                "repeat": args.repeat,
                "order": names,
                "max_offsets_per_trigger": args.max_offsets,
                "brokers": summary,
                "ratio_pydmq_over_kafka": None if ratio is None else round(ratio, 4),
                "versions": info,
                "machine": machine,
                "ok": ok,
                "wall_seconds": round(time.perf_counter() - wall_start, 1),
            },
            sort_keys=False,
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
