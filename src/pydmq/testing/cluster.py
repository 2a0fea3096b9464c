"""ClusterProcess: N real pydmq nodes (broker + controller each) as child processes, for tests.

Every node listens on three free loopback ports (client, controller and control-plane
listener: the last serves only the controller's LeaderAndIsr/StopReplica/UpdateMetadata);
node ids are 1..N and every node is a voter. Fault tests kill (SIGKILL), pause (SIGSTOP) and resume
(SIGCONT) single nodes; only the PIDs this object started are ever signalled, and every wait
is bounded::

    with ClusterProcess(3, tmp_path) as cluster:
        producer = Producer(cluster.bootstrap)
        cluster.kill(2)
        cluster.restart(2)
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydmq.cluster_process import (
    DEFAULT_LAUNCHER,
    NodeSpec,
    is_listening,
    node_command,
    plan_nodes,
    spawn,
    stop_processes,
    voters_of,
)
from pydmq.testing.ports import free_ports
from pydmq.testing.process import BrokerProcess

if TYPE_CHECKING:
    from pydmq.protocol.records import BatchHeader

__all__ = [
    "FAST_FAILOVER",
    "ClusterNode",
    "ClusterProcess",
    "free_ports",
    "replica_batches",
    "replica_headers",
    "running_cluster",
]

# Node settings for fault tests: a 1 s broker session (a killed or paused leader is replaced
# within a couple of seconds), quick follower fetches, groups that start at once.
FAST_FAILOVER: dict[str, object] = {
    "broker.session.timeout.ms": 1000,
    "broker.heartbeat.interval.ms": 250,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 100,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 0,
}


def replica_headers(data_dir: Path, topic: str, partition: int) -> list[BatchHeader]:
    """The header of every batch of one node's replica, read offline from its data
    directory (the node must be stopped)."""
    from pydmq.engines.segment.engine import SegmentStorageEngine
    from pydmq.storage.api import LogConfig, TopicPartition

    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TopicPartition(topic, partition), LogConfig())
        try:
            return list(log.batch_headers(0))
        finally:
            log.close()
    finally:
        engine.close()


def replica_batches(data_dir: Path, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(base offset, last offset delta, CRC) of every batch of one node's replica (offline)."""
    return [
        (h.base_offset, h.last_offset_delta, h.crc)
        for h in replica_headers(data_dir, topic, partition)
    ]


def _wait_stopped(pid: int, stopped: bool, timeout: float) -> None:
    """Until /proc says ``pid`` is (not) stopped; returns at once where there is no /proc."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if (state in ("T", "t")) == stopped:
            return
        time.sleep(0.005)
    raise TimeoutError(f"process {pid} did not {'stop' if stopped else 'continue'} in time")


class ClusterNode(BrokerProcess):
    """One node of a :class:`ClusterProcess`: a :class:`BrokerProcess` with a controller
    listener and the cluster's voters. Owned by the test thread."""

    def __init__(
        self,
        spec: NodeSpec,
        voters: str,
        overrides: Mapping[str, object] | None = None,
        launcher: Sequence[str] = DEFAULT_LAUNCHER,
    ) -> None:
        super().__init__(
            spec.data_dir,
            host=spec.host,
            port=spec.port,
            overrides=overrides,
            log_path=spec.log_path,
        )
        self.spec = spec
        self.node_id = spec.node_id
        self.controller_port = spec.controller_port
        self.control_plane_port = spec.control_plane_port
        self.http_port = spec.http_port
        self.voters = voters
        self.launcher = tuple(launcher)
        self.paused = False
        # Environment variables of this node's process only (e.g. its failpoint file).
        self.env: dict[str, str] = {}

    @property
    def bootstrap(self) -> str:
        return self.spec.bootstrap

    @property
    def controller_address(self) -> str:
        return self.spec.controller_address

    @property
    def running(self) -> bool:
        """Started and not exited (a paused node is running)."""
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        return node_command(self.spec, self.voters, self.overrides, self.launcher)

    def spawn(self) -> None:
        """Start the process without waiting for it to listen."""
        if self.running:
            raise RuntimeError(f"node {self.node_id} is already running")
        self.spec.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = spawn(self.command(), self.log_path, self.env)
        self.paused = False

    def wait_listening(self, deadline: float) -> None:
        """Until every listener accepts connections, which means the node is ready: a cluster
        node opens its client port only once registered, unfenced and caught up with the
        controller's metadata. Raises if the process exits or time runs out."""
        ports = [p for p in (self.port, self.controller_port, self.control_plane_port) if p]
        while True:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"node {self.node_id} exited with {code}:\n{self.log_tail()}")
            if all(is_listening(self.host, port) for port in ports):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"node {self.node_id} did not listen on {self.bootstrap} and "
                    f"{self.controller_address} in time\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def start(self, timeout: float = 30.0) -> ClusterNode:
        self.spawn()
        try:
            self.wait_listening(time.monotonic() + timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT) and self.paused:
            self.resume()  # a stopped process would not act on SIGTERM until continued
        super().kill(sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def pause(self, timeout: float = 5.0) -> None:
        """SIGSTOP, then wait (bounded) until the kernel reports the process stopped."""
        self.kill(signal.SIGSTOP)
        if self.process is not None:
            _wait_stopped(self.process.pid, True, timeout)

    def resume(self, timeout: float = 5.0) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)
            _wait_stopped(self.process.pid, False, timeout)
        self.paused = False

    def stop(self, timeout: float = 15.0) -> None:
        if self.process is not None:
            stop_processes({self.node_id: self.process}, timeout)
        self.process = None
        self.paused = False


class ClusterProcess:
    """N node processes on free loopback ports; ``with`` starts and stops them all."""

    def __init__(
        self,
        n: int = 3,
        base_dir: str | Path = "./pydmq-cluster",
        extra_config: Mapping[str, object] | None = None,
        *,
        host: str = "127.0.0.1",
        node_config: Mapping[int, Mapping[str, object]] | None = None,
        launcher: Sequence[str] = DEFAULT_LAUNCHER,
    ) -> None:
        """``extra_config`` applies to every node, ``node_config[node_id]`` to one node;
        ``launcher`` is the command that runs ``serve`` (default ``python -m pydmq``)."""
        self.base_dir = Path(base_dir)
        self.host = host
        ports = free_ports(4 * n, host)
        specs = plan_nodes(
            n,
            self.base_dir,
            host=host,
            ports=list(zip(ports[:n], ports[n : 2 * n], strict=True)),
            control_plane_ports=ports[2 * n : 3 * n],
            http_ports=ports[3 * n :],
        )
        self.voters = voters_of(specs)
        per_node = node_config or {}
        self.nodes: dict[int, ClusterNode] = {
            s.node_id: ClusterNode(
                s,
                self.voters,
                {**(extra_config or {}), **per_node.get(s.node_id, {})},
                launcher,
            )
            for s in specs
        }

    # -- addresses ------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """Every node's client listener, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def controller_addresses(self) -> list[str]:
        return [node.controller_address for node in self.nodes.values()]

    def node(self, node_id: int) -> ClusterNode:
        """The node with id ``node_id`` (1..N): ``pid``, ``port``, ``controller_port``,
        ``control_plane_port``..."""
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id} (nodes: {sorted(self.nodes)})") from None

    def running(self) -> list[int]:
        """Ids of the nodes whose process is alive (paused ones included)."""
        return [i for i, node in self.nodes.items() if node.running]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> ClusterProcess:
        """Spawn every node, then wait (up to ``timeout`` in all) for all to be ready (to
        listen on every port)."""
        try:
            for node in self.nodes.values():
                node.spawn()
            deadline = time.monotonic() + timeout
            for node in self.nodes.values():
                node.wait_listening(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> list[int]:
        """SIGTERM every running node at once, SIGKILL those still alive after ``timeout``;
        returns the ids that had to be killed."""
        processes = {
            i: node.process
            for i, node in self.nodes.items()
            if node.process is not None and node.running
        }
        killed = stop_processes(processes, timeout) if processes else []
        for node in self.nodes.values():
            node.process = None
            node.paused = False
        return killed

    def kill(self, node_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to one node (SIGKILL/SIGTERM/SIGINT also wait for it to exit)."""
        self.node(node_id).kill(sig)

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the node keeps its sockets but answers nothing until :meth:`resume`.
        Returns once the process is stopped."""
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()

    def stop_node(self, node_id: int, timeout: float = 15.0) -> None:
        """Graceful stop of one node (SIGTERM, SIGKILL after ``timeout``)."""
        self.node(node_id).stop(timeout)

    def start_node(self, node_id: int, timeout: float = 30.0) -> ClusterNode:
        return self.node(node_id).start(timeout)

    def restart(self, node_id: int, timeout: float = 30.0) -> ClusterNode:
        """Stop (if running) and start one node on the same ports and data directory."""
        node = self.node(node_id)
        node.stop()
        return node.start(timeout)

    def wait_for(
        self,
        predicate_name: str,
        check: Callable[[], bool],
        timeout: float = 30.0,
        interval: float = 0.1,
    ) -> None:
        """Poll ``check()`` until it returns True; TimeoutError naming ``predicate_name``."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception as exc:  # e.g. a connection refused while nodes start
                last = exc
            time.sleep(interval)
        raise TimeoutError(f"{predicate_name} not reached in {timeout} s (last error: {last!r})")

    def wait_for_brokers(
        self,
        count: int | None = None,
        timeout: float = 30.0,
        client_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """Until Metadata from some node lists ``count`` (default N) brokers;
        ``client_kwargs``: how to log in (:class:`~pydmq.client.KafkaClient`'s ``sasl``...)."""
        from pydmq.client import KafkaClient

        want = len(self.nodes) if count is None else count
        addresses = [self.nodes[i].bootstrap for i in self.running()]

        def check() -> bool:
            with KafkaClient(addresses, timeout=2.0, **(client_kwargs or {})) as client:
                return len(client.refresh_metadata([]).brokers) >= want

        self.wait_for(f"{want} brokers in Metadata", check, timeout)

    def copy_logs(self, dest: Path) -> None:
        """Replace ``dest`` with copies of every node's log (``node-<id>.log``), for
        post-mortems after the cluster's temporary directory is gone."""
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True, exist_ok=True)
        for node_id, node in self.nodes.items():
            if node.log_path.exists():
                shutil.copy(node.log_path, dest / f"node-{node_id}.log")

    def log_tails(self, size: int = 2000) -> str:
        """The end of every node's log, for failure messages."""
        return "\n".join(
            f"--- node {i} ({node.log_path}) ---\n{node.log_tail(size)}"
            for i, node in self.nodes.items()
        )

    def __enter__(self) -> ClusterProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def running_cluster(
    n: int, prefix: str, overrides: Mapping[str, object], logs_to: Path
) -> Iterator[ClusterProcess]:
    """A started ``n``-node cluster in a temporary directory named after ``prefix``, every
    broker registered: stopped on the way out, its node logs copied to ``logs_to`` and the
    directory removed (a test fixture's body)."""
    import tempfile

    root = Path(tempfile.mkdtemp(prefix=prefix))
    cluster = ClusterProcess(n, root, dict(overrides))
    cluster.start()
    try:
        cluster.wait_for_brokers(n, timeout=30)
        yield cluster
    finally:
        cluster.stop()
        cluster.copy_logs(logs_to)
        shutil.rmtree(root, ignore_errors=True)
