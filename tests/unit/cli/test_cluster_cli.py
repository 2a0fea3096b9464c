"""``pydmq cluster up|status``: arguments, node commands, process management (with a fake node
standing in for ``pydmq serve``) and the status report (a pure function of responses)."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from pydmq.cli import cluster as cluster_cli
from pydmq.cli import main, serve
from pydmq.cli.cluster import render_status, run_up
from pydmq.cluster_process import NodeSpec, node_command, plan_nodes, voters_of
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionDataResponse,
    ReplicaState,
    TopicDataResponse,
)
from pydmq.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pydmq.testing.cluster import free_ports
from pydmq.testing.embedded import EmbeddedBroker

FAKE_NODE = Path(__file__).resolve().parents[2] / "support" / "fake_node.py"
LAUNCHER = (sys.executable, str(FAKE_NODE))
T0 = 1_700_000_000_000  # a wall-clock time in ms


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pydmq")
    sub = parser.add_subparsers(dest="command", required=True)
    cluster_cli.add_parser(sub)
    serve.add_parser(sub)
    return parser


# -- arguments and planning ------------------------------------------------------------------------


def test_up_arguments() -> None:
    args = _parser().parse_args(["cluster", "up"])
    assert (args.nodes, args.data_dir, args.base_port, args.controller_base_port) == (
        3,
        "./pydmq-cluster",
        9092,
        19092,
    )
    assert (args.host, args.override, args.stop_timeout) == ("127.0.0.1", [], 30.0)
    args = _parser().parse_args(
        [
            "cluster",
            "up",
            "5",
            "--base-port",
            "29092",
            "--controller-base-port",
            "39092",
            "--data-dir",
            "/tmp/x",
            "-o",
            "num.partitions=3",
            "-o",
            "a=b",
        ]
    )
    assert (args.nodes, args.base_port, args.controller_base_port) == (5, 29092, 39092)
    assert args.override == ["num.partitions=3", "a=b"]
    with pytest.raises(SystemExit):
        _parser().parse_args(["cluster", "up", "0"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["cluster"])


def test_status_arguments() -> None:
    args = _parser().parse_args(["cluster", "status"])
    assert (args.bootstrap_server, args.controller) == ("127.0.0.1:9092", [])
    args = _parser().parse_args(
        ["cluster", "status", "-b", "h:1", "--controller", "h:2,h:3", "--controller", "h:4"]
    )
    assert (args.bootstrap_server, args.controller) == ("h:1", ["h:2,h:3", "h:4"])


def test_cluster_is_a_registered_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["cluster", "--help"])
    assert exc.value.code == 0
    assert "status" in capsys.readouterr().out


def test_plan_nodes(tmp_path: Path) -> None:
    specs = plan_nodes(3, tmp_path)
    assert [(s.node_id, s.port, s.controller_port) for s in specs] == [
        (1, 9092, 19092),
        (2, 9093, 19093),
        (3, 9094, 19094),
    ]
    assert specs[1].data_dir == tmp_path / "node-2"
    assert specs[1].log_path == tmp_path / "node-2.log"
    assert voters_of(specs) == "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094"
    v6 = plan_nodes(1, tmp_path, host="::1", ports=[(1000, 2000)])
    assert v6[0].bootstrap == "[::1]:1000" and v6[0].voter == "1@[::1]:2000"
    with pytest.raises(ValueError):
        plan_nodes(0, tmp_path)
    with pytest.raises(ValueError):
        plan_nodes(2, tmp_path, ports=[(1, 2), (2, 3)])
    with pytest.raises(ValueError):
        plan_nodes(1, tmp_path, base_port=65535, controller_base_port=65536)


def test_node_command_is_a_valid_cluster_config(tmp_path: Path) -> None:
    """The command ``up`` runs parses with ``pydmq serve`` into a consistent cluster config."""
    specs = plan_nodes(3, tmp_path)
    cmd = node_command(specs[1], voters_of(specs), {"num.partitions": 6})
    assert cmd[:4] == [sys.executable, "-m", "pydmq", "serve"]
    config = serve.build_config(_parser().parse_args(cmd[3:]))
    assert config.node_id == 2
    assert config.process_roles == frozenset({"broker", "controller"})
    assert config.controller_quorum_voters == {
        1: ("127.0.0.1", 19092),
        2: ("127.0.0.1", 19093),
        3: ("127.0.0.1", 19094),
    }
    assert config.listeners == ["PLAINTEXT://127.0.0.1:9093", "CONTROLLER://127.0.0.1:19093"]
    assert config.advertised_listeners == ["PLAINTEXT://127.0.0.1:9093"]
    assert config.log_dir == tmp_path / "node-2"
    assert config.get_int("num.partitions") == 6
    assert config.listener_security_protocols()["CONTROLLER"] == "PLAINTEXT"


# -- process management with fake nodes ------------------------------------------------------------


def _fake_specs(tmp_path: Path, n: int) -> list[NodeSpec]:
    ports = free_ports(2 * n)
    return plan_nodes(n, tmp_path, ports=list(zip(ports[:n], ports[n:], strict=True)))


def _commands(specs: list[NodeSpec], **overrides: object) -> dict[int, list[str]]:
    voters = voters_of(specs)
    return {s.node_id: node_command(s, voters, overrides, LAUNCHER) for s in specs}


def _fake_pids(specs: list[NodeSpec]) -> list[int]:
    pids = []
    for s in specs:
        info = json.loads((s.data_dir / "fake-node.json").read_text())
        pids.append(int(info["pid"]))
    return pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie of an already-reaped child cannot exist here: run_up waits for its children.
    return False


class _Runner:
    """run_up in a thread (so no signal handlers), with its output captured."""

    def __init__(self, specs: list[NodeSpec], commands: dict[int, list[str]], **kw: float) -> None:
        self.out = io.StringIO()
        self.stop = threading.Event()
        self.result: int | None = None
        self.thread = threading.Thread(
            target=self._run,
            args=(specs, commands, kw.get("start_timeout", 10.0), kw.get("stop_timeout", 5.0)),
        )
        self.thread.start()

    def _run(
        self, specs: list[NodeSpec], commands: dict[int, list[str]], start: float, stop: float
    ) -> None:
        self.result = run_up(
            specs,
            commands,
            start_timeout=start,
            stop_timeout=stop,
            out=self.out,
            stop_event=self.stop,
        )

    def wait_for_output(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.out.getvalue():
            assert time.monotonic() < deadline, f"{text!r} not in:\n{self.out.getvalue()}"
            assert self.thread.is_alive() or text in self.out.getvalue(), self.out.getvalue()
            time.sleep(0.02)

    def join(self, timeout: float = 15.0) -> int:
        self.thread.join(timeout)
        assert not self.thread.is_alive()
        assert self.result is not None
        return self.result


def test_up_starts_waits_and_stops_every_node(tmp_path: Path) -> None:
    specs = _fake_specs(tmp_path, 3)
    runner = _Runner(specs, _commands(specs))
    runner.wait_for_output("press Ctrl-C")
    text = runner.out.getvalue()
    assert f"bootstrap: {','.join(s.bootstrap for s in specs)}" in text
    assert f"controllers: {voters_of(specs)}" in text
    pids = _fake_pids(specs)
    assert not any(_gone(p) for p in pids)
    runner.stop.set()
    assert runner.join() == 0
    assert all(_gone(p) for p in pids)
    assert "stopping 3 node(s)" in runner.out.getvalue()
    assert "killed" not in runner.out.getvalue()
    assert "fake node stopping" in specs[0].log_path.read_text()


def test_up_reports_dead_nodes_and_exits_when_all_died(tmp_path: Path) -> None:
    specs = _fake_specs(tmp_path, 2)
    # Both nodes listen (are ready) well before they die, so the cluster comes up first.
    runner = _Runner(specs, _commands(specs, **{"fake.exit.after.ms": 2000}))
    assert runner.join() == 1
    text = runner.out.getvalue()
    assert "node 1 (pid" in text and "exited with code 3" in text
    assert "node 2 (pid" in text
    assert "every node has exited" in text


def test_up_kills_nodes_that_ignore_sigterm(tmp_path: Path) -> None:
    specs = _fake_specs(tmp_path, 2)
    runner = _Runner(specs, _commands(specs, **{"fake.ignore.sigterm": "true"}), stop_timeout=0.5)
    runner.wait_for_output("press Ctrl-C")
    pids = _fake_pids(specs)
    runner.stop.set()
    assert runner.join() == 0
    text = runner.out.getvalue()
    assert "node 1 did not stop within 0.5 s: killed" in text
    assert "node 2 did not stop within 0.5 s: killed" in text
    assert all(_gone(p) for p in pids)


def test_up_refuses_ports_in_use(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = int(busy.getsockname()[1])
        specs = plan_nodes(1, tmp_path / "c", ports=[(port, free_ports(1)[0])])
        out = io.StringIO()
        result = run_up(specs, _commands(specs), start_timeout=1, stop_timeout=1, out=out)
    assert result == 1
    assert (
        f"node 1: port {port} on 127.0.0.1 is in use; choose other ports with --base-port "
        "and --controller-base-port"
    ) in out.getvalue()
    assert not specs[0].data_dir.exists()
    # the controller port is named as well when it is the busy one
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = int(busy.getsockname()[1])
        specs = plan_nodes(1, tmp_path / "c", ports=[(free_ports(1)[0], port)])
        out = io.StringIO()
        assert run_up(specs, _commands(specs), start_timeout=1, stop_timeout=1, out=out) == 1
    assert f"node 1: port {port} on 127.0.0.1 is in use" in out.getvalue()


def test_up_command_stops_on_sigterm(tmp_path: Path) -> None:
    """The real command in its own process: SIGTERM -> nodes stopped, exit 0."""
    client, controller = free_ports(2)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pydmq",
            "cluster",
            "up",
            "1",
            "--data-dir",
            str(tmp_path),
            "--base-port",
            str(client),
            "--controller-base-port",
            str(controller),
            "--http-base-port",
            "0",
            "--node-launcher",
            f"{sys.executable} {FAKE_NODE}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "press Ctrl-C" in line or not line:
                break
        assert any(f"bootstrap: 127.0.0.1:{client}" in line for line in lines), lines
        (pid,) = _fake_pids(plan_nodes(1, tmp_path))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "stopped" in out
    assert _gone(pid)


# -- status ----------------------------------------------------------------------------------------


def _metadata() -> MetadataResponse:
    def part(
        index: int, leader: int, replicas: list[int], isr: list[int]
    ) -> MetadataResponsePartition:
        offline = [r for r in replicas if r not in isr and leader < 0]
        return MetadataResponsePartition(
            partition_index=index,
            leader_id=leader,
            replica_nodes=replicas,
            isr_nodes=isr,
            offline_replicas=offline,
        )

    return MetadataResponse(
        cluster_id="abc",
        controller_id=2,
        brokers=[
            MetadataResponseBroker(node_id=2, host="127.0.0.1", port=9093, rack="r2"),
            MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092),
        ],
        topics=[
            MetadataResponseTopic(
                name="orders",
                topic_id=uuid.uuid4(),
                partitions=[
                    part(1, 2, [2, 3, 1], [2, 1]),
                    part(0, 1, [1, 2, 3], [1, 2, 3]),
                    part(2, -1, [3], []),
                ],
            ),
            MetadataResponseTopic(
                name="audit", topic_id=uuid.uuid4(), partitions=[part(0, 1, [1, 2], [1, 2])]
            ),
        ],
    )


def _quorum(error: int = 0) -> DescribeQuorumResponse:
    def replica(node: int, leo: int, fetch: int) -> ReplicaState:
        return ReplicaState(
            replica_id=node,
            log_end_offset=leo,
            last_fetch_timestamp=fetch,
            last_caught_up_timestamp=fetch,
        )

    return DescribeQuorumResponse(
        topics=[
            TopicDataResponse(
                topic_name="__cluster_metadata",
                partitions=[
                    PartitionDataResponse(
                        partition_index=0,
                        error_code=error,
                        leader_id=2,
                        leader_epoch=7,
                        high_watermark=120,
                        current_voters=[
                            replica(3, 100, T0 + 9_000),
                            replica(2, 125, T0 + 10_000),
                            replica(1, 125, T0 + 9_900),
                        ],
                        observers=[replica(4, 90, -1)],
                    )
                ],
            )
        ],
        nodes=[
            Node(node_id=2, listeners=[Listener(name="CONTROLLER", host="127.0.0.1", port=19093)])
        ],
    )


def test_render_status() -> None:
    text = render_status(_metadata(), _quorum(), now_ms=T0 + 10_000)
    lines = text.splitlines()
    assert lines[0] == "Cluster: abc  controller: 2"
    assert lines[1] == "Quorum (__cluster_metadata): leader 2, epoch 7, high watermark 120"
    assert lines[2].split() == [
        "NODE",
        "STATUS",
        "LOG",
        "END",
        "OFFSET",
        "LAG",
        "LAST",
        "FETCH",
        "LAST",
        "CAUGHT",
        "UP",
    ]
    assert lines[3].split() == ["1", "Follower", "125", "0", "100", "ms", "ago", "100", "ms", "ago"]
    assert lines[4].split()[:4] == ["2", "Leader", "125", "0"]
    assert lines[5].split()[:4] == ["3", "Follower", "100", "25"]
    assert lines[6].split() == ["4", "Observer", "90", "35", "-", "-"]
    assert lines[7] == "  endpoints: 2: CONTROLLER 127.0.0.1:19093"
    # node 3 hosts replicas but is not alive in the metadata: down, its replicas missing
    assert lines[8] == "Brokers (3: 2 up, 1 down):"
    assert lines[10].split() == ["1", "127.0.0.1:9092", "-", "up"]
    assert lines[11].split() == ["2", "127.0.0.1:9093", "r2", "up"]
    assert lines[12].split() == [
        "3",
        "-",
        "-",
        "not",
        "alive",
        "(fenced",
        "or",
        "not",
        "registered)",
    ]
    assert lines[13] == "Under-replicated partitions (2 of 4):"
    assert lines[15].split() == ["orders", "0", "1", "1,2,3", "1,2,3", "3"]
    assert lines[16].split() == ["orders", "1", "2", "2,3,1", "2,1", "3"]
    assert lines[17] == "Offline partitions (1 of 4):"
    assert lines[19].split() == ["orders", "2", "-1", "3", "-", "3"]
    assert len(lines) == 20


def test_render_status_shows_a_dead_broker_down_before_it_is_fenced() -> None:
    """A broker the metadata still lists alive (the controller has not fenced it yet) but
    whose listener refuses connections: down, the partitions it leads offline and the ones
    it follows under-replicated, although their ISR still names it."""
    text = render_status(_metadata(), None, down={2: "connection refused"})
    lines = text.splitlines()
    assert "Brokers (3: 1 up, 2 down):" in lines
    assert ["2", "127.0.0.1:9093", "r2", "down", "(connection", "refused)"] in [
        line.split() for line in lines
    ]
    under = lines.index("Under-replicated partitions (2 of 4):")
    assert lines[under + 2].split() == ["audit", "0", "1", "1,2", "1,2", "2"]
    assert lines[under + 3].split() == ["orders", "0", "1", "1,2,3", "1,2,3", "2,3"]
    offline = lines.index("Offline partitions (2 of 4):")
    assert lines[offline + 2].split() == ["orders", "1", "2", "2,3,1", "2,1", "2,3"]


def test_render_status_healthy_and_quorum_problems() -> None:
    healthy = _metadata()
    healthy.topics = healthy.topics[1:]
    text = render_status(healthy, None, quorum_note="single-node mode")
    assert "Quorum: single-node mode" in text
    assert "Under-replicated partitions: none (of 1)" in text
    assert "Offline partitions: none (of 1)" in text
    text = render_status(healthy, _quorum(error=6))
    assert "Quorum: error NOT_LEADER_OR_FOLLOWER" in text
    absolute = render_status(healthy, _quorum())
    assert str(T0 + 10_000) in absolute  # without now_ms the timestamps are printed as they are
    monotonic = _quorum()
    monotonic.topics[0].partitions[0].current_voters[0].last_fetch_timestamp = 12345
    assert "  12345  " in render_status(healthy, monotonic, now_ms=T0)  # not wall time: raw


def test_status_against_a_single_node_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with EmbeddedBroker(tmp_path) as broker:
        assert main(["cluster", "status", "-b", broker.bootstrap, "--timeout", "5"]) == 0
        out = capsys.readouterr().out
        assert "Quorum: single-node mode or unknown" in out
        assert "Brokers (1):" in out and broker.bootstrap in out
        assert "Under-replicated partitions: none" in out
        # the broker's own listener is no controller listener: reported, not fatal
        code = main(["cluster", "status", "-b", broker.bootstrap, "--controller", broker.bootstrap])
        assert code == 0
        assert "no controller answered DescribeQuorum" in capsys.readouterr().out
        assert main(["cluster", "status", "-b", broker.bootstrap, "--controller", "h:x"]) == 2
