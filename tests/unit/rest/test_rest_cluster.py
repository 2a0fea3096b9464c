"""The REST admin API of a 3-node cluster of real ``pydmq serve`` processes: a topic created
through a broker that is not the active controller (forwarded as a client's CreateTopics),
seen from the other brokers, and its Idempotency-Key replayed, by that broker and by another,
after the active controller is killed (SIGKILL) and another is elected (the answer is a
metadata record); a write after the change reaches the new controller; without a quorum the
quorum is answered 503 SERVICE_UNAVAILABLE.

Timings are printed (``-s``); the only time bounds are wedge bounds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pydmq.testing.cluster import ClusterProcess

pytestmark = pytest.mark.timeout(240)

WEDGE_S = 60.0


def _until(what: str, check: Any) -> Any:
    deadline = time.monotonic() + WEDGE_S
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except OSError as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {WEDGE_S} s: {last!r}")


def test_create_through_a_follower_and_replay_after_a_controller_change(
    tmp_path: Path, client: Any
) -> None:
    cluster = ClusterProcess(
        3, tmp_path, {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 3000}
    )
    cluster.start()
    try:
        cluster.wait_for_brokers(3)
        rests = {i: client(node.http_port) for i, node in cluster.nodes.items()}

        def controller(i: int) -> int | None:
            answer = rests[i].request("GET", "/v1/admin/cluster/controller")
            return int(answer.json["id"]) if answer.status == 200 else None

        active = _until("an active controller", lambda: controller(1))
        via = next(i for i in cluster.nodes if i != active)
        rest = rests[via]
        brokers = rest.request("GET", "/v1/admin/cluster/brokers").json["brokers"]
        assert [b["id"] for b in brokers] == [1, 2, 3]
        quorum = rest.request("GET", "/v1/admin/cluster/quorum").json
        assert quorum["leader_id"] == active
        assert sorted(v["id"] for v in quorum["voters"]) == [1, 2, 3]

        key = {"Idempotency-Key": "cluster-create-1"}
        body = {"name": "replicated", "partitions": 3, "replication_factor": 3}
        started = time.monotonic()
        first = rest.request("POST", "/v1/admin/topics", body, key)
        print(
            f"create through broker {via} (controller {active}): {time.monotonic() - started:.3f} s"
        )
        assert first.status == 201, first.body
        assert first.json["replication_factor"] == 3
        other = next(i for i in cluster.nodes if i not in (via, active))

        def described() -> Any:
            answer = rests[other].request("GET", "/v1/admin/topics/replicated")
            ok = answer.status == 200 and all(len(p["isr"]) == 3 for p in answer.json["partitions"])
            return answer.json if ok else None

        topic = _until("the topic on another broker", described)
        assert [sorted(p["replicas"]) for p in topic["partitions"]] == [[1, 2, 3]] * 3
        assert rest.request("POST", "/v1/admin/topics", body).status == 409

        cluster.kill(active)
        started = time.monotonic()
        new = _until(
            "a new active controller",
            lambda: (c := controller(via)) is not None and c != active and c,
        )
        print(f"controller {active} killed; {new} active after {time.monotonic() - started:.3f} s")
        # the answer is in the metadata log: any broker replays it, after the change
        for i in (via, other):
            again = rests[i].request("POST", "/v1/admin/topics", body, key)
            assert (again.status, again.body) == (201, first.body), (i, again.body)
            assert again.headers["idempotent-replayed"] == "true"
            assert again.headers["location"] == "/v1/admin/topics/replicated"
        reused = rests[other].request("POST", "/v1/admin/topics", {"name": "x"}, key)
        assert reused.status == 422
        after = _until(
            "a creation through the new controller",
            lambda: (
                (
                    a := rest.request(
                        "POST",
                        "/v1/admin/topics",
                        {"name": "later", "partitions": 1, "replication_factor": 2},
                    )
                ).status
                == 201
                and a
            ),
        )
        assert after.json["replication_factor"] == 2

        # one voter left of three (the one asked): no quorum, no active controller to describe
        cluster.kill(other)
        # (a leader that was asked keeps answering until it notices it lost its quorum)
        started = time.monotonic()
        lost = _until(
            "the quorum answered as lost",
            lambda: (a := rest.request("GET", "/v1/admin/cluster/quorum")).status == 503 and a,
        )
        print(f"quorum lost: 503 after {time.monotonic() - started:.3f} s")
        assert lost.error["code"] == "SERVICE_UNAVAILABLE"
        assert lost.headers["retry-after"] == "1"
    finally:
        cluster.stop()
