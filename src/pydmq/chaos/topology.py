"""The cluster of a chaos run: N node processes whose every listener sits behind the proxy.

Each node advertises its client listener and its control-plane listener (the controller's
LeaderAndIsr/StopReplica/UpdateMetadata pushes) at proxy ports, and every node's
``controller.quorum.voters`` names the proxy ports of the controller listeners, so Raft,
heartbeats, replica fetches, controller pushes and client traffic all cross the proxy and can
be cut or delayed per link. The harness's own observer talks to the real ports directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pydmq.chaos.proxy import ProxyProcess, Route
from pydmq.chaos.security import harness_client_kwargs, node_config
from pydmq.chaos.storage import NodeDisk, NodeFailpoints
from pydmq.cluster_process import CONTROL_PLANE
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, free_ports

__all__ = ["NODE_CONFIG", "ChaosCluster", "node_label"]

# A 1 s broker session, as the availability goal assumes (see FAST_FAILOVER). The share
# group's member sessions and acquisition locks short enough that a killed share member's
# partitions and records come back within the run, and deliveries up to Kafka's limit of 10
# before a record is archived.
NODE_CONFIG: dict[str, object] = {
    **FAST_FAILOVER,
    "group.share.session.timeout.ms": 6000,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.record.lock.duration.ms": 10000,
    "group.share.delivery.count.limit": 10,
}


def node_label(node_id: int) -> str:
    """The proxy's name for a node (see :func:`pydmq.chaos.proxy.classify`)."""
    return f"node-{node_id}"


class ChaosCluster:
    """A :class:`ClusterProcess` plus the :class:`ProxyProcess` in front of it."""

    def __init__(
        self,
        n: int,
        base_dir: Path,
        extra_config: dict[str, object] | None = None,
        *,
        disk_mb: int | None = None,
        failpoints: bool = False,
    ):
        """``disk_mb``: give each node's data dir a tmpfs of that size (root only);
        ``failpoints``: give each node a failpoint file the nemesis can arm at run time."""
        self.base_dir = base_dir
        self.cluster = ClusterProcess(
            n, base_dir, {**NODE_CONFIG, **node_config(), **(extra_config or {})}
        )
        self.disks: dict[int, NodeDisk] = {}
        self.failpoints: dict[int, NodeFailpoints] = {}
        for node_id, node in self.cluster.nodes.items():
            if disk_mb is not None:
                self.disks[node_id] = NodeDisk(node.data_dir, disk_mb)
            if failpoints:
                points = NodeFailpoints(base_dir / f"failpoints-node-{node_id}")
                self.failpoints[node_id] = points
                node.env.update(points.env)
        host = self.cluster.host
        proxy_ports = free_ports(3 * n, host)
        self.proxy_client_port: dict[int, int] = {}
        self.proxy_controller_port: dict[int, int] = {}
        self.proxy_control_plane_port: dict[int, int] = {}
        routes: list[Route] = []
        for k, (node_id, node) in enumerate(sorted(self.cluster.nodes.items())):
            client_port, controller_port = proxy_ports[k], proxy_ports[n + k]
            control_plane_port = proxy_ports[2 * n + k]
            self.proxy_client_port[node_id] = client_port
            self.proxy_controller_port[node_id] = controller_port
            self.proxy_control_plane_port[node_id] = control_plane_port
            label = node_label(node_id)
            routes.append(Route(label, host, client_port, host, node.port))
            routes.append(Route(label, host, controller_port, host, node.controller_port))
            routes.append(Route(label, host, control_plane_port, host, node.control_plane_port))
        voters = ",".join(
            f"{i}@{host}:{port}" for i, port in sorted(self.proxy_controller_port.items())
        )
        for node_id, node in self.cluster.nodes.items():
            node.overrides["advertised.listeners"] = (
                f"PLAINTEXT://{host}:{self.proxy_client_port[node_id]},"
                f"{CONTROL_PLANE}://{host}:{self.proxy_control_plane_port[node_id]}"
            )
            node.overrides["controller.quorum.voters"] = voters
        self.proxy = ProxyProcess(routes, log_path=base_dir / "proxy.log")

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.cluster.nodes)

    @property
    def bootstrap(self) -> str:
        """The proxied client listeners: what producers, consumers and readers use."""
        host = self.cluster.host
        return ",".join(f"{host}:{p}" for _, p in sorted(self.proxy_client_port.items()))

    def direct_address(self, node_id: int) -> str:
        """A node's real client listener, bypassing the proxy (for the observer only)."""
        return self.cluster.node(node_id).bootstrap

    def start(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for points in self.failpoints.values():
            points.clear()
        try:
            for disk in self.disks.values():
                disk.mount()
        except BaseException:
            self._unmount()
            raise
        try:
            self.proxy.start()
            self.cluster.start()
            self.cluster.wait_for_brokers(
                len(self.cluster.nodes), timeout=60, client_kwargs=harness_client_kwargs()
            )
        except BaseException:
            self.stop()
            self._unmount()
            raise

    def stop(self) -> None:
        try:
            self.cluster.stop()
        finally:
            self.proxy.stop()

    def release_disks(self, keep: bool = False) -> None:
        """Unmount the nodes' filesystems after the last offline read; with ``keep``, first
        copy each node's data to ``<data dir>.kept`` for inspection (a failed run)."""
        if keep:
            for disk in self.disks.values():
                if disk.mounted:
                    disk.free()
                    shutil.copytree(disk.path, disk.path.with_name(disk.path.name + ".kept"))
        self._unmount()

    def _unmount(self) -> None:
        for disk in self.disks.values():
            disk.unmount()
