"""Liveness and readiness of a node (``/v1/health/live``, ``/v1/health/ready``).

Live: the process serves HTTP (answering at all is the proof). Ready:

- single node: its client listeners serve, and with them its local controller (the metadata
  log replayed, the partitions opened);
- cluster-mode broker: its client listeners serve; it is registered with the active
  controller, not fenced, has applied the controller's metadata that lists it alive (what
  :meth:`BrokerCluster.wait_ready` waits for), and the controller answered one of its
  heartbeats within ``broker.session.timeout.ms`` (without a quorum the controller would fence
  it after that long; the broker can no longer tell);
- controller-only node: its Raft quorum has a known leader (the active controller).

A node whose broker and controller both run is ready when its broker is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydmq.metrics.source import NodeView

__all__ = ["Readiness", "readiness"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """The verdict and each check that led to it (the JSON body's ``checks``)."""

    ready: bool
    checks: dict[str, bool] = field(default_factory=dict)
    reason: str | None = None

    def to_json(self, node_id: int) -> dict[str, object]:
        body: dict[str, object] = {
            "status": "ready" if self.ready else "not_ready",
            "node_id": node_id,
            "checks": self.checks,
        }
        if self.reason is not None:
            body["reason"] = self.reason
        return body


def readiness(node: NodeView) -> Readiness:
    broker = node.broker
    if broker is None:
        controller = node.controller
        leader = controller is not None and controller.active_controller_id >= 0
        return Readiness(
            leader,
            {"quorum_leader_known": leader},
            None if leader else "the controller quorum has no known leader",
        )
    serving = node.serving_clients
    cluster = broker.cluster
    if cluster is None:
        checks = {"serving": serving, "local_controller": broker.local_controller is not None}
        ready = all(checks.values())
        return Readiness(ready, checks, None if ready else "the node is still starting")
    lifecycle = cluster.lifecycle
    epoch = lifecycle.broker_epoch
    session_s = node.config.get_int("broker.session.timeout.ms") / 1000
    checks = {
        "registered": epoch >= 0,
        "unfenced": epoch >= 0 and not lifecycle.fenced,
        "metadata_caught_up": epoch >= 0
        and cluster.metadata_cache.metadata_offset >= epoch
        and cluster.metadata_cache.is_alive(node.node_id),
        "controller_contact": epoch >= 0 and time.monotonic() - lifecycle.last_contact <= session_s,
        "serving": serving,
    }
    failed = [name for name, ok in checks.items() if not ok]
    return Readiness(not failed, checks, f"failed: {', '.join(failed)}" if failed else None)
