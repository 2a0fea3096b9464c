"""Run a workload set against each target in turn and append one JSON line per result.

    python -m benchmarks.omb --targets pydmq,kafka,tansu --set goals --driver librdkafka,java \
        --duration 15 --out build/omb/results.jsonl [--latency-fraction 0.5] [--backlog-bytes N]

For every target (one after the other, never two at once; Apache Kafka first, because the
fixed-rate latency runs of every target are paced at ``--latency-fraction`` x *Kafka's*
measured max rate for the same workload and driver, or the target's own max without
Kafka): start it with 1 node for the RF=1 workloads and 3 nodes for the RF=3 ones (or skip,
with the reason printed and recorded, when the target cannot), put ``--warmup`` seconds of
untimed load through it, run every workload with every driver, stop it.

Modes per workload and driver, each on a fresh topic; topics are deleted after their
workload:

* ``produce``  -- max rate for ``--duration`` s;
* ``consume``  -- write for ``--duration`` s with full batches (untimed, ``linger.ms=1000``),
  then time reading it all from offset 0;
* ``latency``  -- fixed rate (fraction x reference max) for ``--duration`` s;
* ``e2e``      -- end-to-end latency at ``--e2e-rate`` (default 50,000 records/s; ``latency``:
  the latency mode's rate);
* ``backlog``  -- write ``--backlog-bytes`` (untimed), then time reading all of it;
* ``ceiling``  -- once per record shape, no broker: the librdkafka producer process's own
  ceiling.

Before each ``latency`` and ``e2e`` measurement the page cache's dirty data is written back
(``sync``; ``--no-settle`` skips it): the max-rate phase before it leaves gigabytes that the
kernel would otherwise write back during the latency measurement, on every target alike.

While a mode runs, the broker processes' CPU time (``/proc/<pid>/stat``, descendants
included) and RSS (sampled every 0.25 s) are recorded with the client's figures. A failed
mode is recorded as an ``error`` line and the run goes on; Ctrl-C or SIGTERM stops the load
generators and the target started here, and exits with 130.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import shlex
import signal
import sys
import threading
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from benchmarks.omb import rdkafka_driver as rd
from benchmarks.omb.procfs import (
    cpu_seconds,
    git_commit,
    machine_info,
    meminfo_kib,
    process_tree,
    rss_bytes,
    settle_writeback,
)
from benchmarks.omb.target import Target
from benchmarks.omb.workloads import SETS, Workload, workload_set

__all__ = ["BrokerSampler", "Run", "main", "parse_args"]

REPO_ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("pydmq", "kafka", "tansu")
DRIVERS = ("librdkafka", "java")
SETTLED_MODES = ("latency", "e2e")  # measured after dirty pages are written back
MODES = ("ceiling", "produce", "consume", "latency", "e2e", "backlog")
DEFAULT_BACKLOG_BYTES = 10 * 1024**3
# End-to-end runs pace at OMB's usual producerRate: a load one Python producer and one Python
# consumer sustain beside the broker on a small machine, so the latency is the broker's.
DEFAULT_E2E_RATE = 50_000.0
MIB = 1024 * 1024
JAVA_MIB_TO_MB = MIB / 1e6  # the Java tools report MiB/s
# The librdkafka driver's producer settings, for the Java producer too.
JAVA_PRODUCER_TUNING: dict[str, object] = {
    "linger.ms": 5,
    "batch.size": 131072,
    "compression.type": "none",
}


# -- broker CPU and RSS -------------------------------------------------------------------------


class BrokerSampler:
    """CPU-seconds and RSS of a target's processes while one mode runs."""

    def __init__(self, roots: Sequence[int], interval: float = 0.25) -> None:
        self.roots = list(roots)
        self.interval = interval
        self.pids: list[int] = []
        self.cpu_start = 0.0
        self.rss_max = 0
        self.private_max = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.sample_rss, daemon=True)

    def __enter__(self) -> BrokerSampler:
        self.pids = process_tree(self.roots)
        self.cpu_start = cpu_seconds(self.pids)
        self.sample()
        self.thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stopped.set()
        self.thread.join(5)

    def sample_rss(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        self.rss_max = max(self.rss_max, rss_bytes(self.pids))
        self.private_max = max(self.private_max, rss_bytes(self.pids, private=True))

    def figures(self, nbytes: float) -> dict[str, float]:
        """Broker CPU over the mode (and per GB of records moved) and its RSS."""
        cpu = cpu_seconds(self.pids) - self.cpu_start
        self.sample()
        rss_end = rss_bytes(self.pids)
        return {
            "broker_cpu_s": cpu,
            "broker_cpu_s_per_gb": cpu / (nbytes / 1e9) if nbytes > 0 else math.nan,
            "broker_rss_max_mb": max(self.rss_max, rss_end) / 1e6,
            "broker_rss_end_mb": rss_end / 1e6,
            # without mapped segment-file pages (reclaimable page cache)
            "broker_private_rss_max_mb": self.private_max / 1e6,
        }


# -- options ---------------------------------------------------------------------------------


def csv(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.omb", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("--targets", type=csv, default=["pydmq"], help="pydmq,kafka,tansu")
    parser.add_argument("--set", dest="set_name", default="goals", choices=sorted(SETS))
    parser.add_argument("--workloads", type=csv, default=[], help="only these workload names")
    parser.add_argument("--driver", type=csv, default=["librdkafka"], help="librdkafka[,java]")
    parser.add_argument("--modes", type=csv, default=list(MODES), help=",".join(MODES))
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per timed mode")
    parser.add_argument(
        "--warmup", type=float, default=5.0, help="untimed seconds of load after each start"
    )
    parser.add_argument("--latency-fraction", type=float, default=0.5)
    parser.add_argument(
        "--e2e-rate",
        type=e2e_rate,
        default=DEFAULT_E2E_RATE,
        help=f"end-to-end records/s, or 'latency' for the latency mode's rate (default {DEFAULT_E2E_RATE:g})",
    )
    parser.add_argument(
        "--backlog-bytes",
        type=byte_size,
        default=DEFAULT_BACKLOG_BYTES,
        help="bytes of record values to catch up on, e.g. 10GiB, 500MB (default 10GiB)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every target this many times, alternating; the report takes each median",
    )
    parser.add_argument(
        "--no-settle",
        dest="settle",
        action="store_false",
        help="do not write back dirty pages (sync) before latency and e2e measurements",
    )
    parser.add_argument("--out", type=Path, default=Path("build/omb/results.jsonl"))
    parser.add_argument("--workdir", type=Path, default=Path("build/omb/work"))
    args = parser.parse_args(argv)
    check_choices(parser, "--targets", args.targets, TARGETS)
    check_choices(parser, "--driver", args.driver, DRIVERS)
    check_choices(parser, "--modes", args.modes, MODES)
    if not 0 < args.latency_fraction <= 1:
        parser.error("--latency-fraction must be in (0, 1]")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


BYTE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
}


def byte_size(text: str) -> int:
    """``--backlog-bytes``: a byte count with an optional unit (``10GiB``, ``500MB``)."""
    number = text.strip().upper().rstrip("BIKMG")
    unit = text.strip().upper()[len(number) :]
    try:
        value = int(float(number) * BYTE_UNITS[unit])
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10GiB, 500MB)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def e2e_rate(text: str) -> float | None:
    """``--e2e-rate``: records/s, or ``latency`` (None) for the fixed-rate latency pace."""
    if text == "latency":
        return None
    rate = float(text)
    if rate <= 0:
        raise argparse.ArgumentTypeError("must be > 0 or 'latency'")
    return rate


def check_choices(
    parser: argparse.ArgumentParser, flag: str, given: Sequence[str], allowed: Sequence[str]
) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown or not given:
        parser.error(f"{flag}: {','.join(unknown) or '(empty)'} (choose from {','.join(allowed)})")


def target_order(names: Sequence[str]) -> list[str]:
    """Kafka first: its max rates pace every other target's fixed-rate runs."""
    return sorted(dict.fromkeys(names), key=lambda name: name != "kafka")


def node_groups(workloads: Sequence[Workload]) -> list[tuple[int, list[Workload]]]:
    """Workloads by the node count they need, single node first."""
    counts = sorted({w.nodes for w in workloads})
    return [(n, [w for w in workloads if w.nodes == n]) for n in counts]


# -- one run ---------------------------------------------------------------------------------


@dataclass
class Run:
    """State of one benchmark invocation: options, result file, reference max rates."""

    args: argparse.Namespace
    command: str
    machine: dict[str, object] = field(default_factory=machine_info)
    commit: str = field(default_factory=git_commit)
    max_rates: dict[tuple[str, str, str], float] = field(default_factory=dict)
    failures: int = 0
    series: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    round: int = 1

    def record(
        self,
        target: Target | None,
        driver: str,
        workload: Workload,
        mode: str,
        status: str,
        figures: dict[str, float] | None = None,
        note: str = "",
        as_target: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """Append one result line to ``--out`` and print it; returns the line.
        ``as_target`` names a target that has no running instance (name, nodes)."""
        line = self.result_line(target, driver, workload, mode, status, figures or {}, note)
        if as_target is not None:
            line.update(target=as_target[0], target_version="", nodes=as_target[1], storage="")
        self.args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(self.args.out, "a") as out:
            out.write(json.dumps(line, allow_nan=False, default=str) + "\n")
        print(human_line(line), flush=True)
        return line

    def result_line(
        self,
        target: Target | None,
        driver: str,
        workload: Workload,
        mode: str,
        status: str,
        figures: dict[str, float],
        note: str,
    ) -> dict[str, Any]:
        info = target.info if target is not None else None
        return {
            "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "target": info.name if info else "client",
            "target_version": info.version if info else self.machine.get("librdkafka", ""),
            "nodes": info.nodes if info else 0,
            "storage": info.storage if info else "",
            "driver": driver,
            "workload": workload.fields(),
            "mode": mode,
            "status": status,
            "note": note,
            "figures": {k: finite(v) for k, v in figures.items()},
            "settings": {
                "duration_s": self.args.duration,
                "warmup_s": self.args.warmup,
                "latency_fraction": self.args.latency_fraction,
                "backlog_bytes": self.args.backlog_bytes,
                "e2e_rate": self.args.e2e_rate,
                "settle": self.args.settle,
            },
            "series": self.series,
            "round": self.round,
            "machine": self.machine,
            "git_commit": self.commit,
            "command": self.command,
        }

    def skip(
        self, target: Target | None, driver: str, workload: Workload, mode: str, why: str
    ) -> None:
        self.record(target, driver, workload, mode, "skipped", note=why)

    def measure(
        self,
        target: Target,
        driver: str,
        workload: Workload,
        mode: str,
        run: Callable[[], dict[str, float]],
        note: str = "",
    ) -> dict[str, float] | None:
        """Run one mode with the broker sampled; a failure is recorded, not raised."""
        try:
            settled = settle_writeback() if self.settles(mode) else {}
            with BrokerSampler(target.pids()) as sampler:
                figures = run()
                figures.update(sampler.figures(figures.get("bytes", 0.0)))
            figures.update(settled)
        except Exception as exc:
            self.fail(target, driver, workload, mode, exc, note)
            return None
        self.record(target, driver, workload, mode, "ok", figures, note)
        return figures

    def fail(
        self,
        target: Target | None,
        driver: str,
        workload: Workload,
        mode: str,
        exc: Exception,
        note: str = "",
    ) -> None:
        """Count and record a mode that failed (``note`` first, then the exception)."""
        self.failures += 1
        detail = "".join(traceback.format_exception_only(exc)).strip()
        self.record(target, driver, workload, mode, "error", note=f"{note} {detail}".strip())

    def settles(self, mode: str) -> bool:
        return bool(self.args.settle) and mode in SETTLED_MODES

    def reference_rate(
        self, target: str, driver: str, workload: Workload
    ) -> tuple[float, str] | None:
        """The max rate fixed-rate runs are paced against: Kafka's when Kafka is a target."""
        kafka = self.max_rates.get(("kafka", driver, workload.name))
        if "kafka" in self.args.targets and kafka:
            return kafka, "kafka"
        own = self.max_rates.get((target, driver, workload.name))
        if "kafka" in self.args.targets and not kafka and own:
            return own, f"{target} (Kafka's max unavailable)"
        return (own, target) if own else None


def finite(value: float) -> float | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def human_line(line: dict[str, Any]) -> str:
    """One line for the terminal: who, what, and the headline figures."""
    head = (
        f"{line['target']:>6} x{line['nodes']} {line['driver']:<10} "
        f"{line['workload']['name']:<28} {line['mode']:<8}"
    )
    if line["status"] != "ok":
        return f"{head} {line['status'].upper()}: {line['note']}"
    return f"{head} {headline(line['figures'])}"


def headline(f: dict[str, Any]) -> str:
    def num(key: str) -> float:
        value = f.get(key)
        return float(value) if isinstance(value, int | float) else math.nan

    parts = []
    if "records_per_s" in f:
        parts.append(f"{num('records_per_s'):>11,.0f} rec/s {num('mb_per_s'):7.1f} MB/s")
    if "latency_p99_ms" in f:
        parts.append(
            f"p50 {num('latency_p50_ms'):.2f} p99 {num('latency_p99_ms'):.2f} "
            f"p99.9 {num('latency_p999_ms'):.2f} max {num('latency_max_ms'):.2f} ms"
        )
    if "target_rate" in f:
        behind = " BEHIND" if f.get("behind") else ""
        parts.append(f"rate {num('achieved_rate'):,.0f}/{num('target_rate'):,.0f}{behind}")
    if "producer_client_main_thread_util" in f:
        bound = " CLIENT-BOUND" if f.get("client_bound") else ""
        parts.append(
            f"producer main {num('producer_client_main_thread_util'):.2f} "
            f"consumer main {num('consumer_client_main_thread_util'):.2f}{bound}"
        )
    if "client_main_thread_util" in f:
        bound = " CLIENT-BOUND" if f.get("client_bound") else ""
        parts.append(
            f"client cpu {num('client_cpu_util'):.2f} (main {num('client_main_thread_util'):.2f}){bound}"
        )
    if "broker_cpu_s" in f:
        parts.append(
            f"broker {num('broker_cpu_s'):.1f} cpu-s ({num('broker_cpu_s_per_gb'):.1f}/GB) "
            f"rss max {num('broker_rss_max_mb'):.0f} MB"
        )
    return " | ".join(parts)


# -- modes per driver ------------------------------------------------------------------------


def new_topic(target: Target, workload: Workload, mode: str, partitions: int | None = None) -> str:
    from benchmarks.omb.targets import create_topic

    name = f"omb-{workload.name}-{mode}-{uuid.uuid4().hex[:6]}"
    create_topic(
        target.bootstrap,
        name,
        partitions or workload.partitions,
        workload.replication_factor,
        workload.topic_configs(),
    )
    return name


def delete_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Best effort: free the disk a workload's topics took (bounded)."""
    if not names:
        return
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    for future in admin.delete_topics(list(names), operation_timeout=30).values():
        with contextlib.suppress(Exception):
            future.result(timeout=60)


def backlog_fits(run: Run, target: Target) -> str | None:
    """Why a memory-only target cannot hold the backlog, if it cannot."""
    limit = meminfo_kib("MemTotal") * 1024 // 4
    if "memory" in target.info.storage and run.args.backlog_bytes > limit:
        return f"memory-only storage: a {run.args.backlog_bytes / 1e9:.1f} GB backlog exceeds 1/4 of RAM"
    return None


class LibrdkafkaModes:
    """The modes of one workload on one target with the confluent-kafka driver."""

    driver = "librdkafka"

    def __init__(self, run: Run, target: Target, workload: Workload) -> None:
        self.run = run
        self.target = target
        self.workload = workload
        self.duration = run.args.duration
        self.topics: list[str] = []
        self.produced: dict[str, float] | None = None

    def wanted(self, mode: str) -> bool:
        return mode in self.run.args.modes

    def topic(self, mode: str) -> str:
        name = new_topic(self.target, self.workload, mode)
        self.topics.append(name)
        return name

    def measure(
        self, mode: str, body: Callable[[], dict[str, float]], note: str = ""
    ) -> dict[str, float] | None:
        return self.run.measure(self.target, self.driver, self.workload, mode, body, note)

    def all(self) -> None:
        try:
            for mode, step in (
                ("produce", self.produce),
                ("consume", self.consume),
                ("latency", self.latency),
                ("e2e", self.end_to_end),
                ("backlog", self.backlog),
            ):
                if self.wanted(mode) or (mode == "produce" and self.needs_max_rate()):
                    step()
        finally:
            delete_topics(self.target.bootstrap, self.topics)

    def needs_max_rate(self) -> bool:
        """Fixed-rate modes need this target's max when it is its own reference."""
        return bool({"latency", "e2e"} & set(self.run.args.modes))

    def produce(self) -> None:
        def body() -> dict[str, float]:
            return self.produce_max(self.topic("produce"), self.duration + 120)

        self.produced = self.measure("produce", body)
        if self.produced:
            key = (self.target.info.name, self.driver, self.workload.name)
            self.run.max_rates[key] = self.produced["records_per_s"]

    def produce_max(self, topic: str, timeout: float) -> dict[str, float]:
        return rd.max_rate_produce(
            self.target.bootstrap, topic, self.workload, duration_s=self.duration, timeout_s=timeout
        )

    def consume(self) -> None:
        """Read back from offset 0 what a full-batch librdkafka producer wrote for
        ``--duration`` s just before (untimed): the same batch layout on every target and
        for both drivers, so the read costs the consumer the same per record."""
        timeout = max(120.0, 20 * self.duration)
        try:
            topic = self.topic("consume")
            written = rd.max_rate_produce(
                self.target.bootstrap,
                topic,
                self.workload,
                duration_s=self.duration,
                timeout_s=timeout,
                extra_config=rd.FULL_BATCHES,
            )
        except Exception as exc:
            self.run.fail(
                self.target, self.driver, self.workload, "consume", exc, "filling failed:"
            )
            return
        records = int(written.get("end_offsets", written["records"]))
        self.measure(
            "consume",
            lambda: {**self.consume_records(topic, records, timeout), "written": float(records)},
            "written with full batches (linger.ms=1000)",
        )

    def consume_records(self, topic: str, records: int, timeout: float) -> dict[str, float]:
        return rd.consume(self.target.bootstrap, topic, self.workload, records, timeout_s=timeout)

    def fixed_rate(self, mode: str) -> tuple[float, str] | None:
        reference = self.run.reference_rate(self.target.info.name, self.driver, self.workload)
        if reference is None:
            self.run.skip(
                self.target, self.driver, self.workload, mode, "no max rate to pace against"
            )
            return None
        rate, source = reference
        return rate * self.run.args.latency_fraction, source

    def latency(self) -> None:
        paced = self.fixed_rate("latency")
        if paced is None:
            return
        rate, source = paced
        note = f"{self.run.args.latency_fraction:g} x {source}'s max rate"
        timeout = 2 * self.duration + 120
        self.measure(
            "latency",
            lambda: self.fixed_rate_run(self.topic("latency"), rate, timeout),
            note,
        )

    def fixed_rate_run(self, topic: str, rate: float, timeout: float) -> dict[str, float]:
        return rd.fixed_rate_produce(
            self.target.bootstrap, topic, self.workload, rate, self.duration, timeout_s=timeout
        )

    def e2e_rate(self) -> tuple[float, str] | None:
        if self.run.args.e2e_rate:
            return self.run.args.e2e_rate, f"{self.run.args.e2e_rate:,.0f} records/s"
        paced = self.fixed_rate("e2e")
        if paced is None:
            return None
        return paced[0], f"{self.run.args.latency_fraction:g} x {paced[1]}'s max rate"

    def end_to_end(self) -> None:
        paced = self.e2e_rate()
        if paced is None:
            return
        rate, note = paced
        timeout = 2 * self.duration + 120
        self.measure("e2e", lambda: self.e2e_run(self.topic("e2e"), rate, timeout), note)

    def e2e_run(self, topic: str, rate: float, timeout: float) -> dict[str, float]:
        return rd.end_to_end(
            self.target.bootstrap, topic, self.workload, rate, self.duration, timeout_s=timeout
        )

    def backlog(self) -> None:
        """Fill a topic with ``--backlog-bytes`` (untimed, broker not sampled), then measure
        reading it all from offset 0; the topic is deleted afterwards."""
        why = backlog_fits(self.run, self.target)
        if why:
            self.run.skip(self.target, self.driver, self.workload, "backlog", why)
            return
        size = self.run.args.backlog_bytes
        timeout = 300.0 + size / 2e6  # bounded even at 2 MB/s
        note = f"{size / 1e9:g} GB backlog"
        topic = ""
        try:
            topic = self.topic("backlog")
            written = self.fill_backlog(topic, size, timeout)
        except Exception as exc:
            self.run.fail(
                self.target, self.driver, self.workload, "backlog", exc, f"{note}: filling failed:"
            )
            self.drop(topic)
            return
        expected = int(written["end_offsets"])

        def body() -> dict[str, float]:
            figures = self.consume_records(topic, expected, timeout)
            figures.update(
                backlog_produce_records_per_s=written["records_per_s"],
                backlog_produce_mb_per_s=written["mb_per_s"],
            )
            return figures

        try:
            self.measure("backlog", body, note)
        finally:
            self.drop(topic)

    def drop(self, topic: str) -> None:
        if topic:
            delete_topics(self.target.bootstrap, [topic])
            self.topics.remove(topic)

    def fill_backlog(self, topic: str, size: int, timeout: float) -> dict[str, float]:
        records = max(1, size // self.workload.record_size)
        return rd.max_rate_produce(
            self.target.bootstrap, topic, self.workload, records=records, timeout_s=timeout
        )


class JavaModes(LibrdkafkaModes):
    """The same modes with Apache Kafka's perf tools (ProducerPerformance & co.)."""

    driver = "java"

    def all(self) -> None:
        if self.workload.keyed:
            why = "ProducerPerformance sends records without keys"
            for mode in self.run.args.modes:
                if mode != "ceiling":
                    self.run.skip(self.target, self.driver, self.workload, mode, why)
            return
        super().all()

    def expected_rate(self) -> float:
        """Records/s to size a max-rate run: librdkafka's on this target, else 50 MB/s."""
        key = (self.target.info.name, "librdkafka", self.workload.name)
        return self.run.max_rates.get(key) or 50e6 / self.workload.record_size

    def produce_max(self, topic: str, timeout: float) -> dict[str, float]:
        records = max(1000, int(self.expected_rate() * self.duration))
        return self.java_produce(topic, records, -1, timeout)

    def java_produce(
        self, topic: str, records: int, throughput: int, timeout: float
    ) -> dict[str, float]:
        from benchmarks.omb.java_driver import java_produce

        raw = java_produce(
            self.target.bootstrap,
            topic,
            records,
            self.workload.record_size,
            self.workload.acks,
            throughput,
            {**JAVA_PRODUCER_TUNING, "enable.idempotence": self.workload.acks == "all"},
            timeout=timeout + 10 * self.duration,
        )
        return java_produce_figures(raw, self.workload, records, throughput)

    def consume_records(self, topic: str, records: int, timeout: float) -> dict[str, float]:
        from benchmarks.omb.java_driver import java_consume

        raw = java_consume(self.target.bootstrap, topic, records, timeout=timeout)
        return java_consume_figures(raw, self.workload)

    def fixed_rate_run(self, topic: str, rate: float, timeout: float) -> dict[str, float]:
        return self.java_produce(
            topic, max(1, int(rate * self.duration)), max(1, int(rate)), timeout
        )

    def e2e_run(self, topic: str, rate: float, timeout: float) -> dict[str, float]:
        from benchmarks.omb.java_driver import java_end_to_end

        count = max(100, int(100 * self.duration))
        raw = java_end_to_end(
            self.target.bootstrap,
            topic,
            count,
            self.workload.record_size,
            self.workload.acks,
            timeout=timeout,
        )
        return {**raw, "records": float(count), "bytes": float(count * self.workload.record_size)}

    def end_to_end(self) -> None:
        note = "EndToEndLatency: one record in flight, 1-partition topic, 1 ms resolution"
        timeout = 2 * self.duration + 120

        def body() -> dict[str, float]:
            topic = new_topic(self.target, self.workload, "e2e", partitions=1)
            self.topics.append(topic)
            return self.e2e_run(topic, 0.0, timeout)

        self.measure("e2e", body, note)

    def fill_backlog(self, topic: str, size: int, timeout: float) -> dict[str, float]:
        records = max(1, size // self.workload.record_size)
        return self.java_produce(topic, records, -1, timeout)


def java_produce_figures(
    raw: dict[str, float], workload: Workload, records: int, throughput: int
) -> dict[str, float]:
    """ProducerPerformance's summary in this suite's keys (MB = 10**6 bytes)."""
    figures = {
        "records": raw["records"],
        "bytes": raw["records"] * workload.record_size,
        "records_per_s": raw["records_per_sec"],
        "mb_per_s": raw["mb_per_sec"] * JAVA_MIB_TO_MB,
        "latency_p50_ms": raw["latency_p50_ms"],
        "latency_p95_ms": raw["latency_p95_ms"],
        "latency_p99_ms": raw["latency_p99_ms"],
        "latency_p999_ms": raw["latency_p999_ms"],
        "latency_max_ms": raw["latency_max_ms"],
        "latency_mean_ms": raw["latency_avg_ms"],
        "end_offsets": raw["records"],
    }
    if throughput > 0:
        figures.update(
            target_rate=float(throughput),
            achieved_rate=raw["records_per_sec"],
            behind=float(rd.fell_behind(throughput, raw["records_per_sec"])),
            behind_pct=max(0.0, (1 - raw["records_per_sec"] / throughput) * 100),
        )
    return figures


def java_consume_figures(raw: dict[str, float], workload: Workload) -> dict[str, float]:
    """ConsumerPerformance's result; rates exclude the group join (``fetch.*``)."""
    records = raw["records"]
    return {
        "records": records,
        "bytes": records * workload.record_size,
        "records_per_s": raw.get("fetch_records_per_sec", raw["records_per_sec"]),
        "mb_per_s": raw.get("fetch_mb_per_sec", raw["mb_per_sec"]) * JAVA_MIB_TO_MB,
        "records_per_s_with_join": raw["records_per_sec"],
        "rebalance_ms": raw.get("rebalance_ms", math.nan),
    }


MODE_CLASSES: dict[str, type[LibrdkafkaModes]] = {"librdkafka": LibrdkafkaModes, "java": JavaModes}


# -- the whole run ---------------------------------------------------------------------------


def run_ceilings(run: Run, workloads: Sequence[Workload]) -> None:
    """The producer process's own ceiling, once per record shape (no broker involved)."""
    seen: set[tuple[int, bool, int]] = set()
    for workload in workloads:
        shape = (workload.record_size, workload.keyed, workload.partitions)
        if shape in seen:
            continue
        seen.add(shape)
        try:
            figures = rd.enqueue_ceiling(workload)
        except Exception as exc:
            run.failures += 1
            run.record(None, "librdkafka", workload, "ceiling", "error", note=str(exc))
            continue
        run.record(
            None, "librdkafka", workload, "ceiling", "ok", figures, "enqueue only, no broker"
        )


def run_target(run: Run, name: str, workloads: Sequence[Workload]) -> None:
    from benchmarks.omb.targets import make_target

    for nodes, group in node_groups(workloads):
        workdir = run.args.workdir / f"{name}-{nodes}"
        try:
            target = make_target(name, nodes, workdir)
        except (ValueError, RuntimeError) as exc:
            record_group(run, name, nodes, group, "skipped", f"cannot run {nodes} node(s): {exc}")
            continue
        print(f"== {name} x{nodes}: {target.info.version} ({target.info.storage})", flush=True)
        try:
            target.start()
        except Exception as exc:
            run.failures += 1
            record_group(run, name, nodes, group, "error", f"did not start: {exc}")
            continue
        try:
            warm_up(run, target, group[0])
            for workload in group:
                run_workload(run, target, workload)
        finally:
            target.stop()


def warm_up(run: Run, target: Target, workload: Workload) -> None:
    """Untimed max-rate produce and consume on a scratch topic right after a start: a JVM
    broker's JIT, page cache and connections warm before anything is measured."""
    seconds = run.args.warmup
    if seconds <= 0 or not target.supports_replication_factor(workload.replication_factor):
        return
    try:
        topic = new_topic(target, workload, "warmup")
        try:
            bootstrap = target.bootstrap
            written = rd.max_rate_produce(
                bootstrap, topic, workload, duration_s=seconds, timeout_s=seconds + 120
            )
            rd.consume(bootstrap, topic, workload, int(written["end_offsets"]), timeout_s=120)
        finally:
            delete_topics(target.bootstrap, [topic])
    except Exception as exc:
        print(f"   warm-up failed (measuring anyway): {exc}", flush=True)
        return
    print(f"   warm-up: {seconds:g} s, {written['records_per_s']:,.0f} rec/s", flush=True)


def record_group(
    run: Run, name: str, nodes: int, group: Sequence[Workload], status: str, why: str
) -> None:
    """One line per workload and driver for a target that cannot run them."""
    for workload in group:
        for driver in run.args.driver:
            run.record(None, driver, workload, "all", status, note=why, as_target=(name, nodes))


def run_workload(run: Run, target: Target, workload: Workload) -> None:
    if not target.supports_replication_factor(workload.replication_factor):
        why = f"{target.info.nodes} node(s) cannot place RF={workload.replication_factor}"
        for driver in run.args.driver:
            run.skip(target, driver, workload, "all", why)
        return
    for driver in run.args.driver:
        MODE_CLASSES[driver](run, target, workload).all()


def selected_workloads(args: argparse.Namespace) -> list[Workload]:
    workloads = workload_set(args.set_name)
    if args.workloads:
        unknown = set(args.workloads) - {w.name for w in workloads}
        if unknown:
            raise SystemExit(
                f"--workloads: not in set {args.set_name!r}: {', '.join(sorted(unknown))}"
            )
        workloads = [w for w in workloads if w.name in args.workloads]
    return workloads


def interrupt_on_sigterm() -> None:
    """SIGTERM (``timeout``, a CI cancel) unwinds like Ctrl-C, so targets get stopped."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    interrupt_on_sigterm()
    shown = list(sys.argv[1:] if argv is None else argv)
    run = Run(args, shlex.join(["python", "-m", "benchmarks.omb", *shown]))
    workloads = selected_workloads(args)
    print(
        f"omb: {len(workloads)} workload(s) x {args.targets} x {args.driver} -> {args.out}",
        flush=True,
    )
    print(f"omb: machine {json.dumps(run.machine)}; commit {run.commit}", flush=True)
    try:
        if "ceiling" in args.modes and "librdkafka" in args.driver:
            run_ceilings(run, workloads)
        for number in range(1, args.rounds + 1):
            run.round = number
            for name in target_order(args.targets):
                run_target(run, name, workloads)
    except KeyboardInterrupt:
        print(
            "omb: interrupted; the targets and load generators started here are stopped", flush=True
        )
        return 130
    print(f"omb: done, {run.failures} failed measurement(s); results in {args.out}", flush=True)
    return 1 if run.failures else 0
