"""What the stand-alone benchmark scripts share: starting ``pydmq serve`` on a loopback port
and timing it until it listens, and bulk-producing with librdkafka's ``produce_batch``.

The scripts run as ``python benchmarks/<script>.py``; each puts the repository first on
``sys.path`` to import this module as ``benchmarks.common``. It imports neither pydmq nor
confluent-kafka at run time: ``import_time.py`` times pydmq imports in child processes
against other source trees and keeps its own process free of them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydmq.testing.ports import free_port

if TYPE_CHECKING:
    import confluent_kafka as ck

__all__ = [
    "DeliveryTally",
    "bulk_producer_config",
    "create_topic",
    "free_port",
    "produce_chunked",
    "single_node",
    "single_node_process",
    "spawn_serve",
    "wait_listening",
]

START_TIMEOUT_S = 30.0
TOPIC_TIMEOUT_S = 120.0  # create_topic: Kafka's JVM may still be starting

# The children's environment: with bytecode caches, as users have them.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def tree_env(src: str | None) -> dict[str, str]:
    """:data:`CHILD_ENV` with source tree ``src`` first on PYTHONPATH (None: as installed),
    followed by that tree's own ``plugins/pydmq-sqlite/src`` when it has one: the installed
    plugin (an entry point every node loads) is the current tree's, which an older tree's
    storage port may not serve."""
    if src is None:
        return CHILD_ENV
    root = Path(src).resolve()
    plugin = root.parent / "plugins" / "pydmq-sqlite" / "src"
    path = [
        str(root),
        *([str(plugin)] if plugin.is_dir() else []),
        *filter(None, [CHILD_ENV.get("PYTHONPATH")]),
    ]
    return {**CHILD_ENV, "PYTHONPATH": os.pathsep.join(path)}


def run_in_tree(src: str | None, code: str, *args: str) -> str:
    """Run ``python -c code args`` against source tree ``src``; its stripped stdout."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=tree_env(src),
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def serve_command() -> list[str]:
    """``pydmq serve``'s command: the venv's script, else ``python -m pydmq``."""
    script = Path(sys.executable).with_name("pydmq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pydmq"]


def spawn_serve(
    launcher: Sequence[str], data_dir: str, env: Mapping[str, str]
) -> tuple[subprocess.Popen[bytes], int, float]:
    """Exec ``<launcher> serve`` with one PLAINTEXT listener on a free loopback port, WARNING
    logs and its output discarded: (process, port, ``perf_counter()`` just before the exec).
    The caller owns the process and stops it."""
    port = free_port()
    command = [
        *launcher,
        "serve",
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port}",
        "--log-dirs",
        data_dir,
        *_free_http_listener(env),
        "--log-level",
        "WARNING",
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(
        command, env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return proc, port, started


def _free_http_listener(env: Mapping[str, str]) -> list[str]:
    """``--http-listener`` on a free port, for the trees that have an HTTP listener (the
    default port, 8082, may be taken); older trees, compared with ``--src``, lack the flag."""
    first = env.get("PYTHONPATH", "").split(os.pathsep)[0]
    tree = Path(first) if first else Path(__file__).resolve().parents[1] / "src"
    if not (tree / "pydmq" / "config" / "http.py").exists():
        return []
    return ["--http-listener", "http://127.0.0.1:0"]


def wait_listening(
    proc: subprocess.Popen[bytes], port: int, started: float, poll_s: float
) -> float:
    """Seconds from ``started`` until ``127.0.0.1:port`` accepts a connection, trying every
    ``poll_s``: a connect, not a log line, is what a client waits for. RuntimeError when the
    broker exits first or does not listen within ``START_TIMEOUT_S``."""
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return time.perf_counter() - started
        except OSError:
            if proc.poll() is not None or time.perf_counter() - started > START_TIMEOUT_S:
                raise RuntimeError("broker did not start") from None
            time.sleep(poll_s)


@contextmanager
def single_node(target: str, workdir: Path, props: Mapping[str, str]) -> Iterator[str]:
    """A fresh single node of ``target`` (``pydmq`` or ``kafka``: Kafka 4.4 from
    compat/kafka) with ``props`` (Kafka's names: both take them) and one partition per new
    topic; yields its bootstrap. Stopped and its data removed on the way out."""
    with single_node_process(target, workdir, props) as (bootstrap, _pid):
        yield bootstrap


@contextmanager
def single_node_process(
    target: str, workdir: Path, props: Mapping[str, str]
) -> Iterator[tuple[str, int]]:
    """:func:`single_node`, yielding its bootstrap and the broker's process id (the JVM's
    for Kafka: start.sh execs it), for the scripts that read the broker's memory."""
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix=f"{target}-", dir=workdir))
    log = open(data / "broker.log", "wb")  # noqa: SIM115 - handed to the child
    if target == "pydmq":
        overrides = {"num.partitions": "1", "auto.create.topics.enable": "false", **props}
        command = [
            *serve_command(),
            "serve",
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{port}",
            "--log-dirs",
            str(data / "logs"),
            "--http-listener",
            "http://127.0.0.1:0",
            "--log-level",
            "WARNING",
        ]
        for name, value in overrides.items():
            command += ["--override", f"{name}={value}"]
        env = dict(os.environ)
    else:
        from benchmarks.omb.java_driver import KAFKA_DIR, ensure_kafka_jars

        ensure_kafka_jars()
        extra = " ".join(f"{k}={v}" for k, v in props.items())
        command = ["bash", str(KAFKA_DIR / "start.sh"), str(port), str(data), str(free_port())]
        env = {**os.environ, "KAFKA_EXTRA_PROPS": f"num.partitions=1 {extra}"}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        yield f"127.0.0.1:{port}", process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
        shutil.rmtree(data, ignore_errors=True)


def create_topic(config: Mapping[str, str], topic: str) -> None:
    """Create ``topic`` (one partition) once the broker answers (bounded: a JVM starts)."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(dict(config))
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            return
        except (ck.KafkaException, TimeoutError) as exc:
            code = exc.args[0].code() if isinstance(exc, ck.KafkaException) else None
            if code == ck.KafkaError.TOPIC_ALREADY_EXISTS:
                return  # an earlier attempt that timed out created it
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def bulk_producer_config(bootstrap: str, acks: str) -> dict[str, object]:
    """Producer configs for as-fast-as-it-goes loads: 5 ms linger and 1 MB batches so the
    broker sees full batches, a queue deep enough (2M records, ~2 GB) that ``produce_batch``
    seldom waits, and no compression, so the figures are the broker's and not a codec's."""
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_000_000,
        "compression.type": "none",
    }


@dataclass
class DeliveryTally:
    """What the delivery reports of a bulk produce said: how many records failed, and the
    latency (delivery report minus enqueue) of the probe records."""

    errors: int = 0
    latencies: list[float] = field(default_factory=list)

    def on_delivery(self, err: object, msg: ck.Message) -> None:
        if err is not None:
            self.errors += 1

    def probe(self, stamp: float) -> Callable[[object, ck.Message], None]:
        """A delivery callback for a record enqueued at ``stamp`` (``perf_counter()``)."""

        def report(err: object, msg: ck.Message) -> None:
            self.on_delivery(err, msg)
            if err is None:
                self.latencies.append(time.perf_counter() - stamp)

        return report


def produce_chunked(
    producer: ck.Producer,
    topic: str,
    payloads: Sequence[bytes],
    count: int,
    tally: DeliveryTally,
    flush_timeout: float,
    chunk: int = 1000,
) -> tuple[int, float]:
    """Enqueue ``count`` records (values cycling through ``payloads``) to partition 0 of
    ``topic`` as fast as librdkafka takes them, then flush: (records still undelivered,
    seconds from the first enqueue to the end of the flush).

    produce_batch enqueues a list per call: a Python call per record would make the load
    generator, not the broker, the limit. The first record of each ``chunk`` carries a
    latency probe into ``tally``; the others carry no callback, so completeness is the
    caller's to check (produce_consume.py consumes every record back).
    """
    template: list[dict[str, object]] = [
        {"value": payloads[i % len(payloads)]} for i in range(chunk)
    ]
    started = time.perf_counter()
    sent = 0
    while sent < count:
        n = min(chunk, count - sent)
        messages = template[:n]
        messages[0] = {"value": payloads[0], "callback": tally.probe(time.perf_counter())}
        queued = 0
        while queued < n:
            try:
                queued += producer.produce_batch(topic, messages[queued:], partition=0)
            except BufferError:
                producer.poll(0.001)
            if queued < n:
                producer.poll(0.001)
        sent += n
        producer.poll(0)
    left = producer.flush(flush_timeout)
    return left, time.perf_counter() - started
