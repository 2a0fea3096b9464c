"""Load from the Java clients: Apache Kafka's own perf tools, run as child JVMs.

The tools come from the ``kafka-tools`` jar that ``compat/kafka/pom.xml`` resolves into
``compat/kafka/dist`` (the same jars the reference broker runs from); on a fresh machine the
first call resolves them with Maven, as ``compat/kafka/start.sh`` does.

* :func:`java_produce` -- ``org.apache.kafka.tools.ProducerPerformance``
  (``kafka-producer-perf-test``). Its latency is measured per record from ``send()`` to the
  delivery callback, and ``--throughput`` only paces the next ``send()``: when the producer
  falls behind, the records that should have been sent meanwhile are not charged the wait, so
  the percentiles are **not** corrected for coordinated omission. Percentiles have 1 ms
  resolution.
* :func:`java_consume` -- ``org.apache.kafka.tools.ConsumerPerformance``
  (``kafka-consumer-perf-test``): one consumer in a fresh group, from the earliest offset.
* :func:`java_end_to_end` -- ``org.apache.kafka.tools.EndToEndLatency``: one record in flight
  at a time, produce -> consume round trip, 1 ms resolution percentiles.

Tansu 0.6.0 (the ``tansu`` target) cannot serve these 4.4 clients: it closes the connection
on their ApiVersions v5 request to a broker (the bootstrap one goes through), so no record is
ever produced or fetched; use the librdkafka driver there.

MB/s figures are the tools' own: mebibytes (2**20 bytes) of record values per second.
Every run is bounded by ``timeout``; a run that times out is killed (only that JVM).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = [
    "KAFKA_DIR",
    "ensure_kafka_jars",
    "java_command",
    "java_consume",
    "java_end_to_end",
    "java_produce",
    "kafka_version",
    "parse_consume_output",
    "parse_end_to_end_output",
    "parse_produce_output",
]

KAFKA_DIR = Path(__file__).resolve().parents[2] / "compat" / "kafka"
DIST_DIR = KAFKA_DIR / "dist"
TOOLS = "org.apache.kafka.tools"
# kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh run with a 512 MiB heap.
JVM_OPTIONS = ("-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true")

_PRODUCE_SUMMARY = re.compile(
    r"(?P<records>\d+)(?P<steady> steady state)? records sent, "
    r"(?P<records_per_sec>[\d.]+|NaN) records/sec \((?P<mb_per_sec>[\d.]+|NaN) MB/sec\), "
    r"(?P<latency_avg_ms>[\d.]+|NaN) ms avg latency, "
    r"(?P<latency_max_ms>[\d.]+|NaN) ms max latency, "
    r"(?P<latency_p50_ms>\d+) ms 50th, (?P<latency_p95_ms>\d+) ms 95th, "
    r"(?P<latency_p99_ms>\d+) ms 99th, (?P<latency_p999_ms>\d+) ms 99.9th"
)
_E2E_AVG = re.compile(r"Avg latency: (?P<avg>[\d.]+) ms")
_E2E_PERCENTILES = re.compile(
    r"Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99\.9th = (?P<p999>\d+)"
)
_CONSUME_COLUMNS = {
    "data.consumed.in.MB": "mb",
    "MB.sec": "mb_per_sec",
    "data.consumed.in.nMsg": "records",
    "nMsg.sec": "records_per_sec",
    "rebalance.time.ms": "rebalance_ms",
    "fetch.time.ms": "fetch_ms",
    "fetch.MB.sec": "fetch_mb_per_sec",
    "fetch.nMsg.sec": "fetch_records_per_sec",
}


# -- jars and commands -----------------------------------------------------------------------------


def ensure_kafka_jars() -> Path:
    """``compat/kafka/dist`` with the Kafka jars in it, resolved with Maven if it has none."""
    if not shutil.which("java"):
        raise RuntimeError("the Java clients need Java 17+ on PATH (`java` not found)")
    if not list(DIST_DIR.glob("kafka-tools-*.jar")):
        if not shutil.which("mvn"):
            raise RuntimeError(
                f"{DIST_DIR} has no Kafka jars and Maven (`mvn`) is not on PATH to resolve them"
            )
        subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "dependency:copy-dependencies",
                "-DoutputDirectory=dist",
                "-DincludeScope=runtime",
            ],
            cwd=KAFKA_DIR,
            check=True,
            timeout=1800,
        )
    return DIST_DIR


def kafka_version() -> str:
    """The Kafka version of the resolved jars (``kafka.version`` in the pom before that)."""
    for jar in sorted(DIST_DIR.glob("kafka-clients-*.jar")):
        return jar.stem.removeprefix("kafka-clients-")
    match = re.search(
        r"<kafka.version>([^<]+)</kafka.version>", (KAFKA_DIR / "pom.xml").read_text()
    )
    return match.group(1) if match else "unknown"


def java_command(main_class: str, args: Sequence[str], log_level: str = "warn") -> list[str]:
    """``java ... main_class args`` on the ``compat/kafka/dist`` classpath."""
    dist = ensure_kafka_jars()
    return [
        "java",
        *JVM_OPTIONS,
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
        "-cp",
        f"{dist}/*",
        main_class,
        *args,
    ]


def _write_properties(directory: Path, props: Mapping[str, object]) -> Path:
    path = directory / "client.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
    return path


def _first_errors(stderr: str, limit: int = 5) -> str:
    """The first distinct exception lines of a tool's log, for error messages."""
    seen: list[str] = []
    for line in stderr.splitlines():
        if ("Exception" in line or "ERROR" in line) and line not in seen:
            seen.append(line)
    return "\n".join(seen[:limit]) or stderr[-2000:]


def _run_tool(main_class: str, args: Sequence[str], timeout: float) -> tuple[str, str]:
    """Run one tool to completion: (stdout, stderr), or RuntimeError with its errors."""
    cmd = java_command(main_class, args)
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{main_class} did not finish in {timeout} s") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"{main_class} exited with {done.returncode}:\n{done.stdout[-1000:]}"
            f"{_first_errors(done.stderr)}"
        )
    return done.stdout, done.stderr


def _run_perf_tool(
    tool: str,
    bootstrap: str,
    topic: str,
    records: int,
    options: Sequence[str],
    props: Mapping[str, object],
    timeout: float,
) -> tuple[str, str]:
    """Run one of the ``org.apache.kafka.tools`` perf tools against ``topic`` for ``records``
    records: the three take the same bootstrap, topic and record-count flags, and client
    configs only from a ``--command-config`` file (written to a scratch directory that lives
    as long as the run). ``options`` are the tool's own flags."""
    with tempfile.TemporaryDirectory(prefix="omb-java-") as tmp:
        args = [
            "--bootstrap-server", bootstrap,
            "--topic", topic,
            "--num-records", str(records),
            *options,
            "--command-config", str(_write_properties(Path(tmp), props)),
        ]  # fmt: skip
        return _run_tool(f"{TOOLS}.{tool}", args, timeout)


# -- parsing (pure, for tests) ---------------------------------------------------------------------


def parse_produce_output(stdout: str, steady_state: bool = False) -> dict[str, float]:
    """The final summary line of ProducerPerformance (the steady-state one if asked)."""
    summaries = [m for m in _PRODUCE_SUMMARY.finditer(stdout) if bool(m["steady"]) == steady_state]
    if not summaries:
        raise RuntimeError(f"no ProducerPerformance summary in its output:\n{stdout[-2000:]}")
    fields = summaries[-1].groupdict()
    fields.pop("steady")
    return {key: float(value) for key, value in fields.items()}


def parse_consume_output(stdout: str) -> dict[str, float]:
    """The CSV row under ConsumerPerformance's header (a WARNING line may come between),
    renamed to this module's keys."""
    names: list[str] = []
    for line in stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if fields[0] == "start.time":
            names = fields
        elif names and len(fields) == len(names):
            row = dict(zip(names, fields, strict=True))
            return {key: float(row[name]) for name, key in _CONSUME_COLUMNS.items() if name in row}
    raise RuntimeError(f"no ConsumerPerformance result in its output:\n{stdout[-2000:]}")


def parse_end_to_end_output(stdout: str) -> dict[str, float]:
    avg = _E2E_AVG.search(stdout)
    percentiles = _E2E_PERCENTILES.search(stdout)
    if avg is None or percentiles is None:
        raise RuntimeError(f"no EndToEndLatency result in its output:\n{stdout[-2000:]}")
    return {
        "latency_avg_ms": float(avg["avg"]),
        "latency_p50_ms": float(percentiles["p50"]),
        "latency_p99_ms": float(percentiles["p99"]),
        "latency_p999_ms": float(percentiles["p999"]),
    }


# -- the tools -------------------------------------------------------------------------------------


def java_produce(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    acks: str | int,
    throughput: int = -1,
    extra_props: Mapping[str, object] | None = None,
    *,
    warmup_records: int = 0,
    timeout: float = 600.0,
) -> dict[str, float]:
    """Produce ``records`` random values of ``record_size`` bytes (null keys).

    ``throughput`` caps records/s (-1: as fast as possible); ``extra_props`` are producer
    configs (``linger.ms``, ``batch.size``, ``compression.type``...). With
    ``warmup_records`` the steady-state figures (after the warm-up) are returned. Keys:
    ``records``, ``records_per_sec``, ``mb_per_sec``, ``latency_{avg,max,p50,p95,p99,p999}_ms``.
    """
    options = ["--record-size", str(record_size), "--throughput", str(throughput)]
    if warmup_records:
        options += ["--warmup-records", str(warmup_records)]
    stdout, stderr = _run_perf_tool(
        "ProducerPerformance",
        bootstrap,
        topic,
        records,
        options,
        {"acks": acks, **(extra_props or {})},
        timeout,
    )
    result = parse_produce_output(stdout, steady_state=warmup_records > 0)
    expected = records - warmup_records if warmup_records else records
    if result["records"] < expected:
        raise RuntimeError(
            f"ProducerPerformance acknowledged {result['records']:.0f} of {expected} records:\n"
            f"{_first_errors(stderr)}"
        )
    return result


def java_consume(
    bootstrap: str,
    topic: str,
    records: int,
    extra_props: Mapping[str, object] | None = None,
    *,
    group: str | None = None,
    idle_timeout_ms: int = 10_000,
    timeout: float = 600.0,
) -> dict[str, float]:
    """Consume ``records`` records from the start of ``topic`` with one consumer.

    Raises if no record came for ``idle_timeout_ms`` before ``records`` were consumed.
    Keys: ``records``, ``mb``, ``records_per_sec`` and ``mb_per_sec`` (over the whole run,
    group join included), ``fetch_records_per_sec`` and ``fetch_mb_per_sec`` (join excluded),
    ``rebalance_ms``, ``fetch_ms``.
    """
    options = ["--timeout", str(idle_timeout_ms)]
    if group is not None:
        options += ["--group", group]
    stdout, stderr = _run_perf_tool(
        "ConsumerPerformance",
        bootstrap,
        topic,
        records,
        options,
        {"auto.offset.reset": "earliest", **(extra_props or {})},
        timeout,
    )
    result = parse_consume_output(stdout)
    if result.get("records", 0.0) < records:
        raise RuntimeError(
            f"ConsumerPerformance consumed {result.get('records', 0.0):.0f} of {records} records"
            f" (no record for {idle_timeout_ms} ms): {result}\n{_first_errors(stderr)}"
        )
    return result


def java_end_to_end(
    bootstrap: str,
    topic: str,
    num_messages: int,
    size: int,
    acks: str | int,
    extra_props: Mapping[str, object] | None = None,
    *,
    timeout: float = 600.0,
) -> dict[str, float]:
    """Round trips of one record at a time through a single-partition ``topic``. Create it
    first (``targets.create_topic``): the tool creates a missing one with replication
    factor 1. Keys: ``latency_{avg,p50,p99,p999}_ms``."""
    stdout, _ = _run_perf_tool(
        "EndToEndLatency",
        bootstrap,
        topic,
        num_messages,
        ["--producer-acks", str(acks), "--record-size", str(size)],
        extra_props or {},
        timeout,
    )
    return parse_end_to_end_output(stdout)
