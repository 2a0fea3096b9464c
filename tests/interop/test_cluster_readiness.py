"""A cluster that is ready when it says so, and a CLI that survives a dead node (real processes).

* ``pydmq cluster up 3`` prints its bootstrap line only once every node is ready: a CreateTopics
  with replication factor 3 from librdkafka's admin client sent at once succeeds; Ctrl-C
  (SIGINT to the session, as a terminal sends it) stops every node.
* ``kill -9`` of the node that is both the active controller and a partition leader (broker
  session 60 s, longer than the test waits): the new controller fences it at once (its
  control-plane listener refuses), the CLI's client follows the leadership to a live node,
  ``cluster status`` shows the dead node down and its partitions under-replicated.
* A node whose quorum is gone stops at once on SIGTERM, and so does a node that is still
  waiting for its quorum.

Timings are printed (run with ``-s``); the only time bounds are wedge bounds.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.cli.cluster import describe_quorum
from pydmq.client import LATEST, KafkaClient
from pydmq.cluster_process import stop_processes
from pydmq.protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.testing.cluster import ClusterProcess, running_cluster

from .cluster_up import cluster_up

confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"
SESSION_MS = 60000  # longer than any wait below: a fence within the test is not a session's


def test_cluster_up_is_ready_when_it_prints_its_bootstrap_line(tmp_path: Path) -> None:
    for round_ in range(3):
        began = time.monotonic()
        with cluster_up(tmp_path / f"round-{round_}") as (process, bootstrap, _):
            ready = time.monotonic()
            admin = confluent_admin.AdminClient({"bootstrap.servers": bootstrap})
            future = admin.create_topics([confluent_admin.NewTopic("t", 3, 3)])["t"]
            future.result(30)  # raises on INVALID_REPLICATION_FACTOR or a controller timeout
            created = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            out, _ = process.communicate(timeout=60)
            stopped = time.monotonic()
        assert process.returncode == 0, out
        reported = re.search(r"^stopped in ([0-9.]+) s$", out, re.MULTILINE)
        assert reported is not None and "killed" not in out, out
        print(
            f"round {round_ + 1}: bootstrap line {ready - began:.2f} s after the start, "
            f"RF=3 topic created {1000 * (created - ready):.0f} ms later, Ctrl-C: every node "
            f"stopped in {reported.group(1)} s (cluster up exited {stopped - created:.2f} s "
            "after the signal)"
        )


# -- a dead node ------------------------------------------------------------------------


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    with running_cluster(
        3,
        "pydmq-readiness-",
        {"broker.session.timeout.ms": SESSION_MS},
        LOG_DIR / request.node.name,
    ) as c:
        yield c


def _active_controller(cluster: ClusterProcess) -> int:
    quorum, note = describe_quorum(cluster.controller_addresses, 5.0)
    assert quorum is not None, note
    return int(quorum.topics[0].partitions[0].leader_id)


def test_killed_controller_and_leader_is_fenced_at_once_and_the_cli_follows(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = _active_controller(cluster)
    live = [n for n in cluster.nodes if n != victim]
    survivor = cluster.node(live[0]).bootstrap
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name="t",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    CreatableReplicaAssignment(partition_index=0, broker_ids=[victim, *live]),
                    CreatableReplicaAssignment(partition_index=1, broker_ids=[*live, victim]),
                ],
            )
        ],
        timeout=15000,
    )
    with KafkaClient(survivor, timeout=10.0) as client:
        response = client.call(request, CreateTopicsResponse)
        assert response.topics[0].error_code == 0, response
        info = client.wait_for_topic("t", timeout=20)
        assert info.partitions[0].leader == victim
        # The client's metadata names the victim as leader of partition 0: the first
        # ListOffsets after the kill goes to a dead node.
        cluster.kill(victim)
        killed = time.monotonic()
        offsets = client.list_offsets("t", {0: LATEST, 1: LATEST})
        followed = time.monotonic()
        assert set(offsets) == {0, 1}
        assert client.leader_for("t", 0) in live

    assert main(["cluster", "status", "-b", survivor, "--timeout", "10"]) == 0
    status = capsys.readouterr().out
    rows = [line.split() for line in status.splitlines()]
    assert any(row[:1] == [str(victim)] and ("down" in row or "not" in row) for row in rows), status
    assert "Under-replicated partitions: none" not in status, status

    assert main(["topics", "describe", "t", "-b", survivor, "--timeout", "10"]) == 0
    capsys.readouterr()

    with KafkaClient(survivor, timeout=2.0) as client:
        deadline = killed + 30  # wedge bound, half the 60 s session
        while victim in {b.node_id for b in client.refresh_metadata([]).brokers}:
            assert time.monotonic() < deadline, "the dead broker was not fenced before its session"
            time.sleep(0.05)
    gone = time.monotonic()
    with capsys.disabled():
        print(
            f"\nkill -9 of node {victim} (active controller, leader): ListOffsets answered by "
            f"the new leader {followed - killed:.3f} s later; fenced (not in Metadata) after "
            f"{gone - killed:.3f} s"
        )


# -- stopping without a quorum ----------------------------------------------------------


def test_a_node_that_lost_its_quorum_stops_at_once(cluster: ClusterProcess) -> None:
    ids = sorted(cluster.nodes)
    for node_id in ids[:2]:
        cluster.kill(node_id)
    last = cluster.node(ids[2])
    assert last.process is not None
    began = time.monotonic()
    killed = _sigterm(last.process, timeout=30)
    took = time.monotonic() - began
    log = last.log_path.read_text(errors="replace")
    assert not killed, log[-3000:]
    assert "controlled shutdown not possible: no quorum" in log, log[-3000:]
    print(f"node {ids[2]} stopped {took:.3f} s after SIGTERM with no quorum left")


def test_a_node_waiting_for_its_quorum_stops_at_once(tmp_path: Path) -> None:
    """One node of three started alone: it never becomes ready (its client port stays
    closed) and SIGTERM stops it at once."""
    cluster = ClusterProcess(3, tmp_path)
    node = cluster.node(1)
    node.spawn()
    try:
        deadline = time.monotonic() + 30
        while b"controller 1 started" not in node.log_path.read_bytes():
            assert node.running and time.monotonic() < deadline, node.log_tail()
            time.sleep(0.05)
        time.sleep(0.5)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((node.host, node.port), timeout=2).close()
        assert node.process is not None
        began = time.monotonic()
        killed = _sigterm(node.process, timeout=30)
        took = time.monotonic() - began
    finally:
        cluster.stop()
    log = node.log_path.read_text(errors="replace")
    assert not killed and "stopping before the node was ready" in log, log[-3000:]
    print(f"a node waiting for its quorum stopped {took:.3f} s after SIGTERM")


def _sigterm(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """SIGTERM one node process; True when it had to be killed after ``timeout``."""
    return bool(stop_processes({0: process}, timeout))
