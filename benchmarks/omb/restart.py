"""Start-up, idle memory, restart-with-data and CPU-per-GB benchmark: pydmq and Apache Kafka.

For each broker of ``--brokers`` (one after the other, never two at once):

1. **start-up**: from process spawn until the broker answers a Metadata request that lists
   itself (raw ApiVersions + Metadata with pydmq's codecs, polled every 10 ms), on an empty
   data dir; median of ``--startup-runs`` (3). pydmq: ``python -m pydmq serve`` as spawned by
   ``pydmq.testing.process.BrokerProcess``'s command (uvloop when installed, as ``serve``
   does). Kafka: ``compat/kafka/start.sh``, which formats an empty data dir with two short
   JVM runs and then execs the broker JVM; the start-up is timed from that exec (the line
   the script prints just before it), the format time is in ``details``.
2. **idle RSS**: VmRSS of the broker process (and any children) 5 s after it answered, empty
   data dir (median over the start-up runs); then again 5 s after creating ``--topics`` x
   ``--partitions-per-topic`` partitions (RF 1). For Kafka the JVM's heap flags and
   ``jcmd GC.heap_info`` totals are noted. Ratio pydmq/Kafka when both ran.
3. **load**: ``--data-bytes`` of ``--record-size`` records written through the real produce
   path (confluent-kafka, acks=1, linger, ~1 MB batches), spread evenly over the partitions;
   the broker's CPU time (utime+stime of /proc/<pid>/stat) per GB written. Then one consumer
   reads everything once from offset 0: broker CPU per GB read. Data dir size (du).
4. **restart after kill -9** (right after the load, so the unflushed tail is recovered), then
   **clean restarts** (SIGTERM; median of ``--restart-runs``): from spawn until Metadata lists
   every partition with a leader and ListOffsets(latest) of the last partition returns the end
   offset it had before the stop. The SIGTERM-to-exit time is reported too.

Every figure is printed and appended, one JSON object per measurement, to ``--out`` (fields:
broker, version, measurement, value, unit, details, machine, git_commit). Only the processes
this script started are signalled (by PID or by the process group they lead), also on errors
and Ctrl-C; every wait is bounded. Data dirs are deleted at the end unless ``--keep``.

pydmq's bytecode is compiled first (``compileall`` of the imported package, ``--no-compile``
skips it): with stale or missing ``.pyc`` files, e.g. under ``PYTHONDONTWRITEBYTECODE=1``,
every start would compile the sources again and the start-up figures would measure that.

``--py-spy DIR`` (pydmq only) runs each pydmq broker under ``py-spy record --idle
--nonblocking --format raw`` and prints where the samples outside ``Broker.stop`` went (the
start-up); the figures of such a run carry ``"profiled": true`` in their details.

    .venv/bin/python -m benchmarks.omb.restart --data-bytes 200MB            # both brokers, small
    .venv/bin/python -m benchmarks.omb.restart --brokers pydmq --data-bytes 1GiB --keep
    .venv/bin/python -m benchmarks.omb.restart                               # 10 GiB, the issue's size
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks.omb.procfs import cpu_seconds, git_commit, machine_info, process_tree, rss_bytes

from pydmq.client import KafkaClient
from pydmq.client.client import LATEST

# The probe's codecs are imported up front so that no lazy import lands inside a timing.
from pydmq.protocol.messages import api_versions as _api_versions  # noqa: F401
from pydmq.protocol.messages import list_offsets as _list_offsets  # noqa: F401
from pydmq.protocol.messages import metadata as _metadata  # noqa: F401
from pydmq.testing.process import BrokerProcess, free_port

REPO = Path(__file__).resolve().parents[2]

KAFKA_START = REPO / "compat" / "kafka" / "start.sh"
KAFKA_DIST = REPO / "compat" / "kafka" / "dist"
BROKER_SETTINGS = {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0}
GB = 1_000_000_000
MB = 1_000_000
POLL_S = 0.01
IDLE_WAIT_S = 5.0
PY_SPY_RATE = 250
CLK_TCK = os.sysconf("SC_CLK_TCK")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?\s*$", re.IGNORECASE)
_HEAP = re.compile(
    r"heap\s+total\s+(?:reserved\s+)?(\d+)K,\s+(?:committed\s+(\d+)K,\s+)?used\s+(\d+)K"
)


# -- pure helpers ---------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``"200MB"`` -> 200,000,000; ``"10GiB"`` -> 10 * 2**30; ``"4096"`` -> 4096."""
    m = _SIZE.match(text)
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 200MB, 10GiB, 4096)")
    number, prefix, binary = m.groups()
    exponent = "kmgt".find(prefix.lower()) + 1 if prefix else 0
    base = 1024 if binary else 1000
    return int(float(number) * base**exponent)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """How ``data_bytes`` are spread: the same record count on every partition."""

    partitions: int
    record_size: int
    records_per_partition: int
    chunk: int  # records per partition per round (about one producer batch)

    @property
    def total_records(self) -> int:
        return self.partitions * self.records_per_partition

    @property
    def total_bytes(self) -> int:
        return self.total_records * self.record_size

    def rounds(self) -> Iterator[int]:
        """Records to send to each partition, round after round."""
        left = self.records_per_partition
        while left > 0:
            n = min(self.chunk, left)
            yield n
            left -= n


def plan_load(data_bytes: int, partitions: int, record_size: int, batch_bytes: int) -> LoadPlan:
    per_partition = max(1, data_bytes // (record_size * partitions))
    chunk = max(1, int(batch_bytes * 0.9) // record_size)
    return LoadPlan(partitions, record_size, per_partition, chunk)


def parse_heap_info(text: str) -> dict[str, float]:
    """Heap totals from ``jcmd <pid> GC.heap_info`` (MB)."""
    m = _HEAP.search(text)
    if not m:
        return {}
    total, committed, used = m.groups()
    out = {"heap_total_mb": int(total) / 1024, "heap_used_mb": int(used) / 1024}
    if committed is not None:
        out["heap_committed_mb"] = int(committed) / 1024
    return out


def summarize_collapsed(
    lines: Iterable[str], top: int = 20, exclude: tuple[str, ...] = ()
) -> tuple[int, list[tuple[str, float, float]]]:
    """Where the samples of a py-spy ``--format raw`` profile went.

    Returns (total samples, [(function, inclusive share, self share)]) for the ``top``
    functions by inclusive share; a function is ``file:name`` (line numbers dropped), counted
    once per stack however often it recurs in it. Stacks with a function whose name contains
    one of ``exclude`` are left out (of the total too).
    """
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in lines:
        line = line.rstrip("\n")
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        names = [_frame_name(frame) for frame in stack.split(";") if frame]
        if any(word in name for name in names for word in exclude):
            continue
        total += count
        for name in set(names):
            inclusive[name] = inclusive.get(name, 0) + count
        if names:
            own[names[-1]] = own.get(names[-1], 0) + count
    if not total:
        return 0, []
    ranked = sorted(inclusive.items(), key=lambda item: -item[1])[:top]
    return total, [(name, n / total, own.get(name, 0) / total) for name, n in ranked]


def _frame_name(frame: str) -> str:
    """``"load (pydmq/engines/segment/loader.py:97)"`` -> ``"pydmq/engines/segment/loader.py:load"``."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame
    path = where.rstrip(")").rsplit(":", 1)[0]
    return f"{path}:{name}"


# -- processes and /proc --------------------------------------------------------------------------


def tree_rss_bytes(pid: int) -> int:
    """RSS of ``pid`` and its descendants."""
    return rss_bytes(process_tree([pid]))


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its descendants (all threads)."""
    return cpu_seconds(process_tree([pid]))


def cpu_during(pid: int, step: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], float]:
    """``step()``'s result and the CPU seconds ``pid``'s tree spent while it ran: the
    broker's cost of a load or a read, whatever its wall time."""
    before = tree_cpu_seconds(pid)
    result = step()
    return result, tree_cpu_seconds(pid) - before


def du_bytes(path: Path) -> tuple[int, int]:
    """(bytes on disk, apparent bytes) of ``path``."""

    def run(*flags: str) -> int:
        out = subprocess.run(
            ["du", "-s", "--block-size=1", *flags, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        ).stdout
        return int(out.split()[0]) if out.strip() else -1

    return run(), run("--apparent-size")


def compile_pydmq() -> str:
    """Bring the bytecode cache of the pydmq package the broker imports up to date."""
    import pydmq

    package = Path(pydmq.__file__).resolve().parent
    result = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", str(package)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"compileall {package} failed:\n{result.stdout}{result.stderr}")
    return f"compiled ({package})"


def java_version() -> str:
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=60, check=False
        ).stderr
        return out.splitlines()[0] if out else "unknown"
    return "unknown"


# -- brokers --------------------------------------------------------------------------------------


class BrokerExited(RuntimeError):
    pass


class ManagedBroker:
    """One broker on one data dir; restarts reuse the dir and the ports. Only the processes
    spawned here are ever signalled: the broker by PID, and at clean-up the process group
    each spawn created (``start_new_session``), whose id is that spawn's PID."""

    name = "?"

    def __init__(self, work: Path) -> None:
        self.work = work
        self.work.mkdir(parents=True, exist_ok=True)
        self.log_path = work / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.spawned_at = 0.0
        self._broker_pid: int | None = None
        self._log_offset = 0

    # overridden
    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    @property
    def data_path(self) -> Path:
        raise NotImplementedError

    def version(self) -> str:
        raise NotImplementedError

    def origin(self) -> float:
        """When the broker process itself began (the spawn, unless a wrapper ran first)."""
        return self.spawned_at

    def startup_details(self) -> dict[str, Any]:
        return {}

    def memory_details(self) -> dict[str, Any]:
        return {}

    # common
    def spawn(self, tag: str = "") -> None:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.spawned_at = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=self._stderr_target(log),
            stdin=subprocess.DEVNULL,
            env=self.env(),
            start_new_session=True,
        )
        log.close()
        self._broker_pid = None
        self._after_spawn()

    def _stderr_target(self, log: IO[bytes]) -> Any:
        return subprocess.STDOUT

    def _after_spawn(self) -> None:
        pass

    @property
    def pid(self) -> int:
        """The broker's own PID."""
        if self._broker_pid is None:
            assert self.proc is not None
            self._broker_pid = self.proc.pid
        return self._broker_pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_since_spawn(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, size: int = 3000) -> str:
        return self.log_since_spawn()[-size:]

    def _wait_exit(self, timeout: float) -> bool:
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def terminate(self, timeout: float) -> float:
        """SIGTERM the broker; seconds until it exited. SIGKILL and raise after ``timeout``."""
        if not self.alive():
            raise BrokerExited(f"{self.name} is not running\n{self.log_tail()}")
        started = time.perf_counter()
        os.kill(self.pid, signal.SIGTERM)
        if not self._wait_exit(timeout):
            self.kill9()
            raise TimeoutError(f"{self.name} did not exit within {timeout:.0f} s of SIGTERM")
        return time.perf_counter() - started

    def kill9(self) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            if not self._wait_exit(60):
                self.cleanup()

    def cleanup(self) -> None:
        """Stop whatever this object spawned and is still running (best effort, bounded)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        group = proc.pid
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(group) == group:
                    os.killpg(group, sig)
                else:
                    os.kill(proc.pid, sig)
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


class PydmqBroker(ManagedBroker):
    name = "pydmq"

    def __init__(self, work: Path, py_spy: Path | None = None) -> None:
        super().__init__(work)
        self.process = BrokerProcess(
            work / "data", overrides=BROKER_SETTINGS, log_path=self.log_path
        )
        self.py_spy = py_spy
        self.profile_path: Path | None = None
        self._profile_tag = ""

    def command(self) -> list[str]:
        cmd = self.process.command()
        if self.py_spy is None:
            return cmd
        self.py_spy.mkdir(parents=True, exist_ok=True)
        self.profile_path = self.py_spy / f"pydmq-{self._profile_tag or 'run'}.txt"
        spy = str(Path(sys.executable).with_name("py-spy"))
        return [
            spy,
            "record",
            "--idle",  # blocking calls (fsync, reads) are start-up time too
            "--nonblocking",
            "--format",
            "raw",
            "--rate",
            str(PY_SPY_RATE),
            "-o",
            str(self.profile_path),
            "--",
            *cmd,
        ]

    def spawn(self, tag: str = "") -> None:
        self._profile_tag = tag
        super().spawn(tag)
        if self.py_spy is None:
            self.process.process = self.proc  # BrokerProcess.kill()/stop() work on it too

    @property
    def pid(self) -> int:
        if self._broker_pid is None:
            assert self.proc is not None
            if self.py_spy is None:
                self._broker_pid = self.proc.pid
            else:  # the broker is py-spy's child
                deadline = time.monotonic() + 10
                while self._broker_pid is None:
                    kids = process_tree([self.proc.pid])[1:]
                    if kids:
                        self._broker_pid = kids[0]
                    elif time.monotonic() > deadline or self.proc.poll() is not None:
                        raise BrokerExited("py-spy did not start the broker")
                    else:
                        time.sleep(0.001)
        return self._broker_pid

    def _after_spawn(self) -> None:
        if self.py_spy is not None:
            _ = self.pid

    def _wait_exit(self, timeout: float) -> bool:
        ok = super()._wait_exit(timeout)
        if ok and self.profile_path is not None:
            print_profile(self.profile_path)
        return ok

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def data_path(self) -> Path:
        return self.process.data_dir

    def version(self) -> str:
        import pydmq

        return pydmq.__version__

    def startup_details(self) -> dict[str, Any]:
        """The broker's own "ready in" (Broker() + start(), after interpreter and imports)."""
        found = re.findall(r"ready in ([0-9.]+) s", self.log_since_spawn())
        return {"in_process_ready_s": float(found[-1])} if found else {}

    def memory_details(self) -> dict[str, Any]:
        try:
            import uvloop  # noqa: F401

            loop = "uvloop"
        except ImportError:
            loop = "asyncio"
        return {"event_loop": loop, "processes": len(process_tree([self.pid]))}


class KafkaBroker(ManagedBroker):
    name = "kafka"
    _EXEC_MARK = b"compat/kafka: starting Apache Kafka"

    def __init__(self, work: Path) -> None:
        super().__init__(work)
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.exec_at: float | None = None
        self._pump: threading.Thread | None = None

    def command(self) -> list[str]:
        return [
            str(KAFKA_START),
            str(self.port),
            str(self.work / "data"),
            str(self.controller_port),
        ]

    def env(self) -> dict[str, str]:
        extra = " ".join(f"{k}={v}" for k, v in BROKER_SETTINGS.items())
        return {**os.environ, "KAFKA_EXTRA_PROPS": extra}

    def _stderr_target(self, log: IO[bytes]) -> Any:
        return subprocess.PIPE

    def _after_spawn(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        self.exec_at = None
        stream = self.proc.stderr

        def pump() -> None:
            with open(self.log_path, "ab") as log:
                for line in iter(stream.readline, b""):
                    if self.exec_at is None and self._EXEC_MARK in line:
                        self.exec_at = time.perf_counter()
                    log.write(line)
                    log.flush()
            stream.close()

        self._pump = threading.Thread(target=pump, name="kafka-stderr", daemon=True)
        self._pump.start()

    def origin(self) -> float:
        return self.exec_at if self.exec_at is not None else self.spawned_at

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_path(self) -> Path:
        return self.work / "data" / "logs"

    def version(self) -> str:
        for jar in sorted(KAFKA_DIST.glob("kafka_2.13-*.jar")):
            return jar.name.removeprefix("kafka_2.13-").removesuffix(".jar")
        return "unknown"

    def startup_details(self) -> dict[str, Any]:
        if self.exec_at is None:
            return {"timed_from": "spawn (exec line not seen)"}
        return {
            "timed_from": "exec of the broker JVM",
            "before_exec_s": round(self.exec_at - self.spawned_at, 4),
        }

    def memory_details(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        with contextlib.suppress(OSError):
            args = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
            out["jvm_flags"] = [a.decode() for a in args if a.startswith((b"-Xm", b"-XX:+Use"))]
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            text = subprocess.run(
                ["jcmd", str(self.pid), "GC.heap_info"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            ).stdout
            out.update(parse_heap_info(text))
        return out


# -- probes ---------------------------------------------------------------------------------------


def wait_until(
    broker: ManagedBroker,
    check: Callable[[KafkaClient], bool],
    timeout: float,
    what: str,
    marks: dict[str, float] | None = None,
) -> float:
    """Poll ``check`` on a raw client until it is true; the perf_counter of that answer.

    ``marks["api_versions"]`` is set when the broker first answered ApiVersions.
    """
    deadline = time.perf_counter() + timeout
    client: KafkaClient | None = None
    last = "no attempt"
    try:
        while True:
            if not broker.alive():
                raise BrokerExited(
                    f"{broker.name} exited while waiting for {what}\n{broker.log_tail()}"
                )
            try:
                if client is None:
                    client = KafkaClient(broker.bootstrap, client_id="restart-bench", timeout=10.0)
                    client.connect()
                    if marks is not None:
                        marks.setdefault("api_versions", time.perf_counter())
                if check(client):
                    return time.perf_counter()
                last = "not yet"
            except WrongAnswer:
                raise
            except Exception as exc:  # refused, reset, timeout, error code: retry
                last = f"{type(exc).__name__}: {exc}"
                if client is not None:
                    client.close()
                    client = None
            if time.perf_counter() >= deadline:
                raise TimeoutError(
                    f"{broker.name}: no {what} within {timeout:.0f} s (last: {last})\n{broker.log_tail()}"
                )
            time.sleep(POLL_S)
    finally:
        if client is not None:
            client.close()


def lists_itself(client: KafkaClient) -> bool:
    return bool(client.refresh_metadata([]).brokers)


def all_led(topics: list[str], partitions_per_topic: int) -> Callable[[KafkaClient], bool]:
    def check(client: KafkaClient) -> bool:
        response = client.refresh_metadata(topics)
        led = 0
        for topic in response.topics:
            if topic.error_code == 0 and topic.name in topics:
                led += sum(1 for p in topic.partitions if p.error_code == 0 and p.leader_id >= 0)
        return led == len(topics) * partitions_per_topic

    return check


class WrongAnswer(RuntimeError):
    """The broker answered, wrongly: no point in polling on."""


def restarted(
    topics: list[str],
    partitions_per_topic: int,
    probe: tuple[str, int],
    end_offset: int,
    marks: dict[str, float],
    patience: float = 30.0,
) -> Callable[[KafkaClient], bool]:
    """Every partition led and the probe partition's latest offset back at ``end_offset``.

    A lower offset may be a high watermark not yet advanced after the restart: polled on for
    ``patience`` seconds after every partition has a leader, then it is lost data. Sets
    ``marks["all_led"]``. One per restart.
    """
    led = all_led(topics, partitions_per_topic)

    def check(client: KafkaClient) -> bool:
        if not led(client):
            return False
        marks.setdefault("all_led", time.perf_counter())
        offset, _ = client.list_offsets(probe[0], {probe[1]: LATEST})[probe[1]]
        wrong = offset > end_offset or time.perf_counter() - marks["all_led"] > patience
        if offset != end_offset and wrong:
            raise WrongAnswer(f"{probe[0]}-{probe[1]} end offset {offset}, expected {end_offset}")
        return offset == end_offset

    return check


def end_offsets(
    bootstrap: str, topics: list[str], partitions_per_topic: int
) -> dict[tuple[str, int], int]:
    with KafkaClient(bootstrap, client_id="restart-bench", timeout=30.0) as client:
        client.refresh_metadata(topics)
        out: dict[tuple[str, int], int] = {}
        for topic in topics:
            result = client.list_offsets(topic, dict.fromkeys(range(partitions_per_topic), LATEST))
            for p, (offset, _) in result.items():
                out[(topic, p)] = offset
        return out


# -- load -----------------------------------------------------------------------------------------


def create_topics(bootstrap: str, topics: list[str], partitions_per_topic: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=partitions_per_topic, replication_factor=1) for t in topics],
        operation_timeout=60,
        request_timeout=120,
    )
    for future in futures.values():
        future.result(timeout=180)


def produce_load(
    bootstrap: str, topics: list[str], partitions_per_topic: int, plan: LoadPlan, timeout: float
) -> dict[str, Any]:
    import confluent_kafka as ck

    rng = random.Random(7)
    payloads = [rng.randbytes(plan.record_size) for _ in range(16)]
    errors: list[str] = []

    def on_error(err: Any, msg: Any) -> None:
        if err is not None and len(errors) < 1000:
            errors.append(str(err))

    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "none",
            "enable.idempotence": False,
            "queue.buffering.max.kbytes": 1_048_576,
            "queue.buffering.max.messages": 2_000_000,
            "message.timeout.ms": int(min(timeout, 600) * 1000),
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    targets = [(t, p) for t in topics for p in range(partitions_per_topic)]
    deadline = time.perf_counter() + timeout
    started = time.perf_counter()
    i = 0
    try:
        for n in plan.rounds():
            for topic, partition in targets:
                for _ in range(n):
                    value = payloads[i & 15]
                    i += 1
                    while True:
                        try:
                            producer.produce(topic, value, partition=partition)
                            break
                        except BufferError:
                            producer.poll(0.01)
                            if time.perf_counter() > deadline:
                                raise TimeoutError("load: producer queue never drained") from None
                producer.poll(0)
            if time.perf_counter() > deadline:
                raise TimeoutError("load did not finish in time")
        left = producer.flush(max(1.0, deadline - time.perf_counter()))
        elapsed = time.perf_counter() - started
        if left or errors:
            raise RuntimeError(
                f"load: {left} records undelivered, {len(errors)} errors: {errors[:3]}"
            )
    finally:
        producer.purge()  # nothing left after a successful flush
        producer.close()
    return {"elapsed_s": elapsed, "records": i, "mb_s": i * plan.record_size / elapsed / MB}


def consume_all(
    bootstrap: str,
    topics: list[str],
    partitions_per_topic: int,
    expected: dict[tuple[str, int], int],
    timeout: float,
) -> dict[str, Any]:
    import confluent_kafka as ck

    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"restart-bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 1_048_576,
            "queued.max.messages.kbytes": 262_144,
        }
    )
    total = sum(expected.values())
    seen = 0
    nbytes = 0
    errors = 0
    started = time.perf_counter()
    deadline = started + timeout
    try:
        consumer.assign(
            [ck.TopicPartition(t, p, 0) for t in topics for p in range(partitions_per_topic)]
        )
        while seen < total and time.perf_counter() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    seen += 1
                    nbytes += len(msg.value() or b"")
                else:
                    errors += 1
    finally:
        consumer.close()
    elapsed = time.perf_counter() - started
    if seen < total:
        raise TimeoutError(f"consume: {seen} of {total} records within {timeout:.0f} s")
    return {
        "elapsed_s": elapsed,
        "records": seen,
        "bytes": nbytes,
        "mb_s": nbytes / elapsed / MB,
        "errors": errors,
    }


# -- results --------------------------------------------------------------------------------------


@dataclass
class Recorder:
    out: Path
    machine: dict[str, Any]
    commit: str
    common: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)

    def __call__(
        self,
        broker: str,
        version: str,
        measurement: str,
        value: float,
        unit: str,
        details: dict[str, Any] | None = None,
        *,
        show: str | None = None,
    ) -> None:
        row = {
            "broker": broker,
            "version": version,
            "measurement": measurement,
            "value": value,
            "unit": unit,
            "details": {
                **self.common,
                "loadavg": [round(x, 2) for x in os.getloadavg()],
                **(details or {}),
            },
            "machine": self.machine,
            "git_commit": self.commit,
        }
        self.results.append(row)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        text = show if show is not None else f"{value:,.3f} {unit}"
        print(f"[{broker:<11}] {measurement:<28} {text}", flush=True)

    def cpu_per_gb(
        self,
        broker: str,
        version: str,
        measurement: str,
        cpu: float,
        nbytes: int,
        transfer: dict[str, Any],
        definition: str,
    ) -> None:
        """One ``cpu-s/GB`` row: the broker's CPU seconds over a transfer of ``nbytes`` bytes
        of record values (the load or the read back), with the transfer's wall time, rate and
        record count beside it so a slow run shows as such."""
        self(
            broker,
            version,
            measurement,
            cpu / (nbytes / GB),
            "cpu-s/GB",
            {
                "cpu_s": round(cpu, 2),
                "bytes": nbytes,
                "wall_s": round(transfer["elapsed_s"], 2),
                "mb_s": round(transfer["mb_s"], 1),
                "records": transfer["records"],
                "definition": definition,
            },
        )

    def value(self, broker: str, measurement: str) -> float | None:
        for row in reversed(self.results):
            if row["broker"] == broker and row["measurement"] == measurement:
                return float(row["value"])
        return None


def print_profile(path: Path, top: int = 30) -> None:
    """The start-up part of a broker's profile (everything but ``Broker.stop``)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return
    everything, _ = summarize_collapsed(lines, 1)
    total, ranked = summarize_collapsed(lines, top, exclude=("Broker.stop",))
    print(
        f"  py-spy {path.name}: {total} samples outside Broker.stop ({total / PY_SPY_RATE:.2f} s "
        f"at {PY_SPY_RATE} Hz, idle included), {everything - total} in it"
    )
    for name, incl, own in ranked:
        print(f"    {incl:6.1%} incl {own:6.1%} self  {name}")


# -- the benchmark --------------------------------------------------------------------------------


@dataclass
class Settings:
    topics: list[str]
    partitions_per_topic: int
    plan: LoadPlan
    startup_runs: int
    restart_runs: int
    start_timeout: float
    min_mb_s: float
    keep: bool

    @property
    def partitions(self) -> int:
        return len(self.topics) * self.partitions_per_topic

    def data_timeout(self, nbytes: int) -> float:
        return 120.0 + nbytes / (self.min_mb_s * MB)


def measure_broker(
    make: Callable[[Path], ManagedBroker],
    work: Path,
    s: Settings,
    rec: Recorder,
    live: list[ManagedBroker],
) -> None:
    startups: list[float] = []
    startup_info: list[dict[str, Any]] = []
    idle_rss: list[int] = []
    broker: ManagedBroker | None = None
    name = version = "?"
    for run in range(s.startup_runs):
        broker = make(work / f"run{run}")
        live.append(broker)
        name, version = broker.name, broker.version()
        marks: dict[str, float] = {}
        broker.spawn(f"start{run}")
        ready = wait_until(broker, lists_itself, s.start_timeout, "Metadata listing itself", marks)
        startups.append(ready - broker.origin())
        startup_info.append(
            {
                "s": round(ready - broker.origin(), 4),
                "from_spawn_s": round(ready - broker.spawned_at, 4),
                **{f"{k}_s": round(v - broker.origin(), 4) for k, v in marks.items()},
                **broker.startup_details(),
            }
        )
        time.sleep(max(0.0, ready + IDLE_WAIT_S - time.perf_counter()))
        idle_rss.append(tree_rss_bytes(broker.pid))
        print(
            f"  {name} start-up run {run + 1}: {startups[-1]:.3f} s, idle RSS "
            f"{idle_rss[-1] / 2**20:.1f} MiB",
            flush=True,
        )
        if run < s.startup_runs - 1:
            broker.terminate(s.start_timeout)
            live.remove(broker)
            if not s.keep:
                shutil.rmtree(broker.work, ignore_errors=True)
    assert broker is not None
    rec(
        name,
        version,
        "startup_s",
        statistics.median(startups),
        "s",
        {
            "runs": startup_info,
            "definition": "spawn to a Metadata answer listing the broker, empty data dir, median",
        },
    )
    mem = broker.memory_details()
    rec(
        name,
        version,
        "idle_rss_mb",
        statistics.median(idle_rss) / 2**20,
        "MiB",
        {
            "runs_mib": [round(r / 2**20, 1) for r in idle_rss],
            **mem,
            "definition": f"VmRSS {IDLE_WAIT_S:.0f} s after start, no topics, median",
        },
    )

    # -- 1,000 partitions
    started = time.perf_counter()
    create_topics(broker.bootstrap, s.topics, s.partitions_per_topic)
    led = wait_until(broker, all_led(s.topics, s.partitions_per_topic), 180, "all partitions led")
    rec(
        name,
        version,
        "create_partitions_s",
        led - started,
        "s",
        {
            "partitions": s.partitions,
            "definition": "CreateTopics until Metadata shows every partition with a leader",
        },
    )
    time.sleep(IDLE_WAIT_S)
    rec(
        name,
        version,
        "rss_1000_partitions_mb",
        tree_rss_bytes(broker.pid) / 2**20,
        "MiB",
        {
            "partitions": s.partitions,
            **broker.memory_details(),
            "definition": f"VmRSS {IDLE_WAIT_S:.0f} s after the partitions have leaders",
        },
    )

    # -- load
    plan = s.plan
    need = plan.total_bytes * 1.3 + 2 * 2**30
    free = shutil.disk_usage(work).free
    if free < need:
        raise RuntimeError(
            f"{human_bytes(free)} free in {work}, the load needs ~{human_bytes(need)}"
        )
    print(
        f"  {name}: writing {human_bytes(plan.total_bytes)} ({plan.total_records:,} x "
        f"{plan.record_size} B, {plan.records_per_partition} per partition)",
        flush=True,
    )
    load, cpu = cpu_during(
        broker.pid,
        lambda: produce_load(
            broker.bootstrap,
            s.topics,
            s.partitions_per_topic,
            plan,
            s.data_timeout(plan.total_bytes),
        ),
    )
    rec.cpu_per_gb(
        name,
        version,
        "produce_cpu_s_per_gb",
        cpu,
        plan.total_bytes,
        load,
        "broker utime+stime while the load was produced (acks=1, ~1 MB batches) "
        "per 1e9 bytes of record values",
    )
    rec(
        name,
        version,
        "rss_after_load_mb",
        tree_rss_bytes(broker.pid) / 2**20,
        "MiB",
        broker.memory_details(),
    )

    ends = end_offsets(broker.bootstrap, s.topics, s.partitions_per_topic)
    wrong = {f"{t}-{p}": o for (t, p), o in ends.items() if o != plan.records_per_partition}
    if wrong:
        print(
            f"  WARNING {name}: {len(wrong)} partitions with an unexpected end offset "
            f"(expected {plan.records_per_partition}): {list(wrong.items())[:5]}"
        )

    read, cpu = cpu_during(
        broker.pid,
        lambda: consume_all(
            broker.bootstrap,
            s.topics,
            s.partitions_per_topic,
            ends,
            s.data_timeout(plan.total_bytes),
        ),
    )
    rec.cpu_per_gb(
        name,
        version,
        "consume_cpu_s_per_gb",
        cpu,
        read["bytes"],
        read,
        "broker utime+stime while one consumer read everything from offset 0, "
        "per 1e9 bytes of record values",
    )

    disk, apparent = du_bytes(broker.data_path)
    rec(
        name,
        version,
        "data_dir_bytes",
        disk,
        "bytes",
        {
            "apparent_bytes": apparent,
            "path": str(broker.data_path),
            "written_bytes": plan.total_bytes,
        },
        show=f"{human_bytes(disk)} on disk ({human_bytes(apparent)} apparent) for "
        f"{human_bytes(plan.total_bytes)} written",
    )

    # -- restarts
    probe = (s.topics[-1], s.partitions_per_topic - 1)
    timeout = s.start_timeout + s.data_timeout(plan.total_bytes)

    def restart(tag: str, what: str) -> tuple[float, dict[str, Any]]:
        marks: dict[str, float] = {}
        check = restarted(s.topics, s.partitions_per_topic, probe, ends[probe], marks)
        broker.spawn(tag)
        ready = wait_until(broker, check, timeout, what, marks)
        seconds = ready - broker.origin()
        return seconds, {
            "s": round(seconds, 4),
            "from_spawn_s": round(ready - broker.spawned_at, 4),
            **{f"{k}_s": round(v - broker.origin(), 4) for k, v in sorted(marks.items())},
            **broker.startup_details(),
        }

    restart_common = {
        "partitions": s.partitions,
        "data_bytes": plan.total_bytes,
        "data_dir_bytes": disk,
        "probe": f"{probe[0]}-{probe[1]}",
        "probe_end_offset": ends[probe],
    }

    broker.kill9()
    seconds, info = restart("restart-unclean", "restart after kill -9")
    rec(
        name,
        version,
        "restart_unclean_s",
        seconds,
        "s",
        {
            **restart_common,
            **info,
            "definition": "kill -9 right after the load and one full "
            "read, then spawn until Metadata shows every partition led and ListOffsets(latest) of "
            "the probe partition is right",
        },
    )
    rec(
        name,
        version,
        "rss_after_restart_mb",
        tree_rss_bytes(broker.pid) / 2**20,
        "MiB",
        {"after": "restart after kill -9, at readiness", **broker.memory_details()},
    )

    clean: list[float] = []
    shutdowns: list[float] = []
    runs: list[dict[str, Any]] = []
    for run in range(s.restart_runs):
        shutdowns.append(broker.terminate(timeout))
        seconds, info = restart(f"restart-clean{run}", "clean restart")
        clean.append(seconds)
        runs.append({**info, "shutdown_s": round(shutdowns[-1], 3)})
        print(
            f"  {name} clean restart {run + 1}: {clean[-1]:.3f} s (shutdown {shutdowns[-1]:.3f} s)",
            flush=True,
        )
    rec(
        name,
        version,
        "shutdown_s",
        statistics.median(shutdowns),
        "s",
        {
            "runs": [round(x, 3) for x in shutdowns],
            "definition": "SIGTERM until the process exited, with the data loaded, median",
        },
    )
    rec(
        name,
        version,
        "restart_clean_s",
        statistics.median(clean),
        "s",
        {
            **restart_common,
            "runs": runs,
            "definition": "SIGTERM, then spawn until Metadata shows "
            "every partition led and ListOffsets(latest) of the probe partition is right, median",
        },
    )

    broker.terminate(timeout)
    live.remove(broker)
    if not s.keep:
        shutil.rmtree(broker.work, ignore_errors=True)


def summary(rec: Recorder, brokers: list[str]) -> None:
    versions = {r["broker"]: r["version"] for r in rec.results}
    if "pydmq" in brokers and "kafka" in brokers:
        pair = f"{versions.get('pydmq', '?')}/{versions.get('kafka', '?')}"
        for measurement in (
            "startup_s",
            "idle_rss_mb",
            "rss_1000_partitions_mb",
            "produce_cpu_s_per_gb",
            "consume_cpu_s_per_gb",
            "restart_unclean_s",
            "restart_clean_s",
        ):
            a, b = rec.value("pydmq", measurement), rec.value("kafka", measurement)
            if a is not None and b:
                rec(
                    "pydmq/kafka",
                    pair,
                    measurement.removesuffix("_mb").removesuffix("_s") + "_ratio",
                    a / b,
                    "ratio",
                    {"pydmq": a, "kafka": b},
                    show=f"{a / b:.3f}  ({a:,.3f} / {b:,.3f})",
                )
    goals = [
        ("startup_s", "pydmq start-up <= 0.5 s", lambda v: v <= 0.5),
        ("idle_rss_ratio", "idle RSS <= 1/4 of Kafka's", lambda v: v <= 0.25),
        (
            "restart_clean_s",
            "clean restart <= 3 s (goal stated for 10 GB / 1,000 partitions)",
            lambda v: v <= 3.0,
        ),
    ]
    print("\ngoals (issue; 2-core machine):")
    for measurement, text, ok in goals:
        broker = "pydmq/kafka" if measurement.endswith("_ratio") else "pydmq"
        value = rec.value(broker, measurement)
        verdict = "n/a" if value is None else ("met" if ok(value) else "NOT met")
        shown = "" if value is None else f" ({value:.3f})"
        print(f"  {text}: {verdict}{shown}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--brokers", default="pydmq,kafka", help="comma-separated: pydmq,kafka")
    parser.add_argument("--data-bytes", default="10GiB", help="data to load (e.g. 200MB, 10GiB)")
    parser.add_argument("--record-size", default="8KiB", help="record value size (1KB-16KB)")
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--startup-runs", type=int, default=3)
    parser.add_argument("--restart-runs", type=int, default=3, help="clean restarts (median)")
    parser.add_argument("--start-timeout", type=float, default=180.0, help="seconds per start")
    parser.add_argument(
        "--min-mb-s",
        type=float,
        default=5.0,
        help="slowest load/read/recovery rate before a timeout (MB/s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "build" / "restart-bench.jsonl",
        help="JSONL file the measurements are appended to",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="parent of the data dirs (default: a temp dir)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and broker logs")
    parser.add_argument(
        "--no-compile", action="store_true", help="do not compile pydmq's bytecode first"
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="run pydmq under py-spy (raw profiles in DIR, figures flagged)",
    )
    args = parser.parse_args(argv)

    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    unknown = set(brokers) - {"pydmq", "kafka"}
    if unknown or not brokers:
        parser.error(f"unknown brokers {sorted(unknown)}; use pydmq,kafka")
    if "kafka" in brokers and shutil.which("java") is None:
        parser.error("the reference Kafka needs java on PATH (see compat/kafka/README.md)")
    record_size = parse_size(args.record_size)
    topics = [f"restart-bench-{i:02d}" for i in range(args.topics)]
    plan = plan_load(
        parse_size(args.data_bytes), len(topics) * args.partitions_per_topic, record_size, 1_000_000
    )
    settings = Settings(
        topics,
        args.partitions_per_topic,
        plan,
        args.startup_runs,
        args.restart_runs,
        args.start_timeout,
        args.min_mb_s,
        args.keep,
    )
    run_id = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    common = {
        "run_id": run_id,
        "data_bytes": plan.total_bytes,
        "partitions": settings.partitions,
        "record_size": record_size,
        "profiled": args.py_spy is not None,
    }
    if "pydmq" in brokers:
        common["pydmq_bytecode"] = "as found" if args.no_compile else compile_pydmq()
    rec = Recorder(args.out, machine_info(), git_commit(), common)

    def on_sigterm(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    root = args.work_dir or Path(tempfile.mkdtemp(prefix="pydmq-restart-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    print(
        f"restart benchmark {run_id}: {', '.join(brokers)}; {settings.partitions} partitions, "
        f"{human_bytes(plan.total_bytes)} in {record_size} B records; work dir {root}; "
        f"results appended to {args.out}",
        flush=True,
    )
    if "kafka" in brokers:
        print(f"  java: {java_version()}", flush=True)
    live: list[ManagedBroker] = []
    status = 0
    try:
        for name in brokers:
            print(f"\n== {name}", flush=True)
            make: Callable[[Path], ManagedBroker] = (
                functools.partial(PydmqBroker, py_spy=args.py_spy)
                if name == "pydmq"
                else KafkaBroker
            )
            try:
                measure_broker(make, root / name, settings, rec, live)
            except Exception as exc:
                status = 1
                print(f"  {name} FAILED: {type(exc).__name__}: {exc}", flush=True)
            finally:
                for broker in list(live):
                    broker.cleanup()
                    live.remove(broker)
                if not args.keep:
                    shutil.rmtree(root / name, ignore_errors=True)
        print()
        summary(rec, brokers)
    except KeyboardInterrupt:
        status = 130
        print("\ninterrupted", flush=True)
    finally:
        for broker in live:
            broker.cleanup()
        if args.keep:
            print(f"kept {root}")
        elif args.work_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
