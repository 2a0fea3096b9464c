"""Local cluster nodes as child processes: plan them, build their commands, start and stop them.

Shared by ``pydmq cluster up`` (:mod:`pydmq.cli.cluster`), the test harness
(:class:`pydmq.testing.cluster.ClusterProcess`) and the chaos harness (:mod:`pydmq.chaos`),
below all three in the layer order (ARCHITECTURE.md, Layers): the CLI and the harnesses both
launch nodes, and neither imports the other for it. Nothing here runs a node in this process:
each is ``<launcher> serve ...`` (by default ``python -m pydmq``), its output appended to its
own log file. Called from whichever thread starts or stops the nodes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydmq.config.broker import DEFAULT_CONTROL_PLANE_LISTENER

__all__ = [
    "CONTROL_PLANE",
    "DEFAULT_LAUNCHER",
    "NodeSpec",
    "format_address",
    "is_listening",
    "log_tail",
    "node_command",
    "plan_nodes",
    "spawn",
    "stop_processes",
    "voters_of",
]

CONTROL_PLANE = DEFAULT_CONTROL_PLANE_LISTENER
DEFAULT_LAUNCHER = (sys.executable, "-m", "pydmq")


# -- planning --------------------------------------------------------------------------------------


def format_address(host: str, port: int) -> str:
    """``host:port``, IPv6 hosts in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """Where one local node listens and keeps its data."""

    node_id: int
    host: str
    port: int
    controller_port: int
    data_dir: Path
    log_path: Path
    control_plane_port: int = 0  # 0: the node opens its control-plane listener itself
    http_port: int = 0  # the HTTP listener (metrics, health); 0: a free port the node picks

    @property
    def bootstrap(self) -> str:
        return format_address(self.host, self.port)

    @property
    def http_listener(self) -> str:
        return f"http://{format_address(self.host, self.http_port)}"

    @property
    def controller_address(self) -> str:
        return format_address(self.host, self.controller_port)

    @property
    def control_plane_address(self) -> str | None:
        """Where the controllers' pushes reach this node, when the plan fixed the port."""
        if not self.control_plane_port:
            return None
        return format_address(self.host, self.control_plane_port)

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{self.controller_address}"


def plan_nodes(
    count: int,
    data_dir: Path,
    *,
    host: str = "127.0.0.1",
    base_port: int = 9092,
    controller_base_port: int = 19092,
    ports: Sequence[tuple[int, int]] | None = None,
    control_plane_ports: Sequence[int] | None = None,
    http_ports: Sequence[int] | None = None,
) -> list[NodeSpec]:
    """Node ids 1..count; ports ``base + i`` unless ``ports`` gives (client, controller) pairs;
    control-plane listeners on ``control_plane_ports`` (default: opened by each node); HTTP
    listeners on ``http_ports`` (default: a free port each node picks)."""
    if count < 1:
        raise ValueError("a cluster needs at least one node")
    pairs = (
        list(ports)
        if ports is not None
        else [(base_port + i, controller_base_port + i) for i in range(count)]
    )
    if len(pairs) != count:
        raise ValueError(f"{count} nodes need {count} port pairs, got {len(pairs)}")
    planes = list(control_plane_ports) if control_plane_ports is not None else [0] * count
    if len(planes) != count:
        raise ValueError(f"{count} nodes need {count} control-plane ports, got {len(planes)}")
    https = list(http_ports) if http_ports is not None else [0] * count
    if len(https) != count:
        raise ValueError(f"{count} nodes need {count} HTTP ports, got {len(https)}")
    used = [p for pair in pairs for p in pair] + [p for p in (*planes, *https) if p]
    if len(set(used)) != len(used) or not all(0 < p < 65536 for p in used):
        raise ValueError(f"ports must be distinct and in 1-65535: {used}")
    return [
        NodeSpec(
            node_id=i + 1,
            host=host,
            port=client,
            controller_port=controller,
            data_dir=data_dir / f"node-{i + 1}",
            log_path=data_dir / f"node-{i + 1}.log",
            control_plane_port=plane,
            http_port=http,
        )
        for i, ((client, controller), plane, http) in enumerate(
            zip(pairs, planes, https, strict=True)
        )
    ]


def voters_of(specs: Sequence[NodeSpec]) -> str:
    return ",".join(s.voter for s in specs)


def node_command(
    spec: NodeSpec,
    voters: str,
    overrides: Mapping[str, object] | None = None,
    launcher: Sequence[str] = DEFAULT_LAUNCHER,
) -> list[str]:
    """``<launcher> serve ...`` for one combined broker+controller node."""
    client = f"PLAINTEXT://{spec.bootstrap}"
    listeners = [client, f"CONTROLLER://{spec.controller_address}"]
    advertised = [client]
    protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    plane = spec.control_plane_address
    if plane is not None:
        listeners.append(f"{CONTROL_PLANE}://{plane}")
        advertised.append(f"{CONTROL_PLANE}://{plane}")
        protocols += f",{CONTROL_PLANE}:PLAINTEXT"
    cmd = [
        *launcher,
        "serve",
        "--node-id",
        str(spec.node_id),
        "--process-roles",
        "broker,controller",
        "--listeners",
        ",".join(listeners),
        "--advertised-listeners",
        ",".join(advertised),
        "--controller-quorum-voters",
        voters,
        "--log-dirs",
        str(spec.data_dir),
        "--http-listener",
        spec.http_listener,
        "--override",
        "controller.listener.names=CONTROLLER",
        "--override",
        f"listener.security.protocol.map={protocols}",
    ]
    if plane is not None:
        cmd += ["--override", f"control.plane.listener.name={CONTROL_PLANE}"]
    for key, value in (overrides or {}).items():
        cmd += ["--override", f"{key}={value}"]
    return cmd


def is_listening(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# -- processes -------------------------------------------------------------------------------------


def spawn(
    cmd: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start one node; its stdout and stderr go to ``log_path`` (appended); ``env`` adds to
    (or overrides) this process's environment."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )


def stop_processes(
    processes: Mapping[int, subprocess.Popen[bytes]], timeout: float = 30.0
) -> list[int]:
    """SIGTERM every live process (SIGCONT first, in case it is paused), wait up to
    ``timeout`` seconds for all of them, then SIGKILL the stragglers; returns their keys.

    Only these processes are signalled, by their own PIDs.
    """
    for proc in processes.values():
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in processes.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.0, deadline - time.monotonic()))
    killed = [key for key, proc in processes.items() if proc.poll() is None]
    for key in killed:
        processes[key].kill()
    for key in killed:
        processes[key].wait(10)
    return killed


def log_tail(path: Path, size: int = 2000) -> str:
    """The whole lines among the last ``size`` bytes of a node's log."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            start = max(0, log.tell() - size)
            log.seek(start)
            data = log.read()
    except OSError:
        return "(no log)"
    if start > 0:
        data = data.partition(b"\n")[2]  # the first line is cut: drop it
    return data.decode(errors="replace")
