"""Health of a 3-node cluster of real ``pydmq serve`` processes, over their HTTP listeners.

* A node started alone (no quorum: 1 of 3 voters) serves HTTP, is live, and is not ready:
  not registered, so no client listener either.
* With all three up, every node is ready, exactly one reports itself active controller, and
  its scrape has the Raft commit latency and both followers' lag.
* With two nodes killed (SIGKILL), the survivor's controller quorum is gone: once
  ``broker.session.timeout.ms`` passes without a heartbeat answered it is not ready, with
  ``controller_contact`` false.

Timings are printed (``-s``); the only time bounds are wedge bounds.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pydmq.cluster_process import is_listening
from pydmq.testing.cluster import ClusterProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

WEDGE_S = 60.0


def health(port: int, which: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/v1/health/{which}", timeout=5
        ) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def wait_for_status(port: int, which: str, status: int) -> dict[str, object]:
    deadline = time.monotonic() + WEDGE_S
    last: object = None
    while time.monotonic() < deadline:
        try:
            code, body = health(port, which)
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if code == status:
                return body
            last = (code, body)
        time.sleep(0.1)
    raise AssertionError(f"/v1/health/{which} on {port} never answered {status}: {last}")


def test_ready_after_registration_and_not_ready_without_quorum(tmp_path: Path) -> None:
    config = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 3000}
    cluster = ClusterProcess(3, tmp_path, config)  # started node by node below
    try:
        first = cluster.node(1)
        first.spawn()
        wait_for_status(first.http_port, "live", 200)
        for _ in range(5):  # alone it cannot register: no quorum to answer it
            code, body = health(first.http_port, "ready")
            assert code == 503, body
            checks = body["checks"]
            assert isinstance(checks, dict) and checks["registered"] is False
            time.sleep(0.2)
        assert not is_listening(first.host, first.port)  # and its clients wait as well

        for node_id in (2, 3):
            cluster.node(node_id).spawn()
        deadline = time.monotonic() + WEDGE_S
        for node_id in (1, 2, 3):
            cluster.node(node_id).wait_listening(deadline)
        for node_id in (1, 2, 3):
            body = wait_for_status(cluster.node(node_id).http_port, "ready", 200)
            assert body["status"] == "ready" and body["node_id"] == node_id

        # exactly one active controller; it timed its commits; its followers' lag is known
        scrapes = {i: scrape(cluster.node(i).http_port) for i in (1, 2, 3)}
        active = [i for i, m in scrapes.items() if m.get(("pydmq_controller_active", ())) == 1]
        assert len(active) == 1, scrapes
        leader = scrapes[active[0]]
        assert leader[("pydmq_raft_commit_latency_seconds_count", ())] >= 1
        lags = [k for k in leader if k[0] == "pydmq_raft_follower_lag_records"]
        assert len(lags) == 2, lags

        cluster.kill(2)
        cluster.kill(3)
        killed = time.monotonic()
        body = wait_for_status(first.http_port, "ready", 503)
        print(f"not ready {time.monotonic() - killed:.1f} s after the quorum was lost: {body}")
        checks = body["checks"]
        assert isinstance(checks, dict) and checks["controller_contact"] is False
        code, _ = health(first.http_port, "live")
        assert code == 200
    finally:
        cluster.stop()
