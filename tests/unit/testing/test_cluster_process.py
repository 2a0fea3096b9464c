"""ClusterProcess: ports, signals and restarts, on fake nodes; one smoke test on real nodes."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.cluster_process import is_listening
from pydmq.config.broker import parse_quorum_voters
from pydmq.testing.cluster import ClusterProcess, free_ports

FAKE_NODE = Path(__file__).resolve().parents[2] / "support" / "fake_node.py"
LAUNCHER = (sys.executable, str(FAKE_NODE))


def _state(pid: int) -> str:
    """The process state letter from /proc (R, S, T = stopped, Z, ...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def _argv(cluster: ClusterProcess, node_id: int) -> list[str]:
    info = json.loads((cluster.node(node_id).data_dir / "fake-node.json").read_text())
    argv: list[str] = info["argv"]
    return argv


def test_free_ports_are_distinct() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20


def test_cluster_of_fake_nodes(tmp_path: Path) -> None:
    cluster = ClusterProcess(
        3,
        tmp_path,
        {"num.partitions": 4},
        node_config={2: {"broker.rack": "r2"}},
        launcher=LAUNCHER,
    )
    ports = [p for n in cluster.nodes.values() for p in (n.port, n.controller_port)]
    assert len(set(ports)) == 6
    assert parse_quorum_voters(cluster.voters.split(",")) == {
        i: ("127.0.0.1", cluster.node(i).controller_port) for i in (1, 2, 3)
    }
    with cluster:
        assert cluster.bootstrap == ",".join(f"127.0.0.1:{cluster.node(i).port}" for i in (1, 2, 3))
        assert cluster.controller_addresses == [
            f"127.0.0.1:{cluster.node(i).controller_port}" for i in (1, 2, 3)
        ]
        assert cluster.running() == [1, 2, 3]
        pids = {i: cluster.node(i).pid for i in (1, 2, 3)}
        assert len(set(pids.values())) == 3
        argv = _argv(cluster, 2)
        assert "num.partitions=4" in argv and "broker.rack=r2" in argv
        assert argv[argv.index("--node-id") + 1] == "2"
        assert "broker.rack=r2" not in _argv(cluster, 1)
        assert cluster.node(1).data_dir == tmp_path / "node-1"

        cluster.pause(1)
        assert _state(pids[1]) == "T" and cluster.node(1).paused
        cluster.resume(1)
        assert _state(pids[1]) != "T" and not cluster.node(1).paused

        cluster.kill(2)
        assert cluster.running() == [1, 3]
        assert not is_listening("127.0.0.1", cluster.node(2).port)
        restarted = cluster.restart(2)
        assert restarted.pid != pids[2] and cluster.running() == [1, 2, 3]
        assert is_listening("127.0.0.1", cluster.node(2).port)

        cluster.pause(3)
        cluster.stop_node(3, timeout=5)  # a paused node still stops gracefully
        assert cluster.running() == [1, 2]
        assert "fake node stopping" in cluster.node(3).log_tail()
        cluster.start_node(3)
        assert cluster.running() == [1, 2, 3]
        with pytest.raises(KeyError):
            cluster.node(4)
        with pytest.raises(RuntimeError):
            cluster.node(1).spawn()  # already running
    assert cluster.running() == []
    assert "--- node 3" in cluster.log_tails()


def test_stop_kills_stragglers(tmp_path: Path) -> None:
    cluster = ClusterProcess(
        1, tmp_path, node_config={1: {"fake.ignore.sigterm": "true"}}, launcher=LAUNCHER
    )
    cluster.start(timeout=20)
    assert cluster.stop(timeout=0.5) == [1]
    assert cluster.running() == []


def test_stop_resumes_paused_nodes_and_stops_them_gracefully(tmp_path: Path) -> None:
    """A paused node gets SIGCONT before SIGTERM. The wait is generous (a loaded machine may
    take seconds to schedule the woken process) and ends as soon as the node exits."""
    cluster = ClusterProcess(2, tmp_path, launcher=LAUNCHER)
    cluster.start(timeout=20)
    cluster.pause(2)
    assert cluster.stop(timeout=30) == []
    assert cluster.running() == []
    assert "fake node stopping" in cluster.node(2).log_tail()


def test_kill_with_sigterm_waits(tmp_path: Path) -> None:
    with ClusterProcess(1, tmp_path, launcher=LAUNCHER) as cluster:
        cluster.kill(1, signal.SIGTERM)
        assert cluster.running() == []


def test_start_failure_is_reported_and_cleans_up(tmp_path: Path) -> None:
    cluster = ClusterProcess(
        2, tmp_path, node_config={2: {"fake.fail.on.start": "true"}}, launcher=LAUNCHER
    )
    with pytest.raises(RuntimeError, match="node 2 exited with 3"):
        cluster.start(timeout=20)
    assert cluster.running() == []


def test_real_nodes_form_a_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Real ``pydmq serve`` nodes: both listeners bound, all brokers registered, and
    ``pydmq cluster status`` finds the quorum through the brokers' config."""
    with ClusterProcess(3, tmp_path) as cluster:
        for node_id in (1, 2, 3):
            node = cluster.node(node_id)
            assert is_listening("127.0.0.1", node.port)
            assert is_listening("127.0.0.1", node.controller_port)
        try:
            cluster.wait_for_brokers(3, timeout=30)
        except TimeoutError:
            pytest.fail(cluster.log_tails())
        assert main(["cluster", "status", "-b", cluster.node(1).bootstrap, "--timeout", "5"]) == 0
        out = capsys.readouterr().out
        assert "Quorum (__cluster_metadata): leader" in out, out
        assert "Brokers (3):" in out, out
    assert cluster.running() == []
