"""Broker: the composition root of one node. Builds the plugin host, the storage engines, the
replica manager and topic registry, opens listeners and runs log maintenance.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydmq.broker.dispatcher import RequestDispatcher
from pydmq.broker.fetch_session import FetchSessionCache
from pydmq.broker.topic_ops import TopicOperations
from pydmq.broker.topics import TopicRegistry
from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.groups.coordinator import GroupConfig, GroupCoordinator
from pydmq.groups.log import ConsumerOffsetsLog
from pydmq.net.connection import KafkaConnection
from pydmq.plugins.host import PluginHost
from pydmq.producers.id_manager import ProducerIdManager
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.storage.api import TopicPartition
from pydmq.storage.checkpoint import write_atomically

__all__ = ["Broker", "Listener", "parse_listener"]

log = logging.getLogger(__name__)
_METADATA_DIR = "__pydmq_metadata"


@dataclass(frozen=True, slots=True)
class Listener:
    """A parsed listener URI: ``NAME://host:port``."""

    name: str
    host: str
    port: int


def parse_listener(uri: str) -> Listener:
    parts = urlsplit(uri)
    if not parts.scheme or parts.port is None:
        raise ValueError(f"listener {uri!r} must look like PLAINTEXT://host:port")
    host = parts.hostname or ""
    return Listener(parts.scheme.upper(), host, parts.port)


class Broker:
    """One pydmq node (broker + controller roles in single-node mode). Event-loop owned."""

    def __init__(self, config: BrokerConfig, plugins: Iterable[object] = ()) -> None:
        self.config = config
        self.node_id = config.node_id
        self.plugins = PluginHost(plugins)
        self.plugins.configure({d: str(config.get(d)) for d in config.definitions})
        self.log_dir = config.log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_or_create_cluster_id()
        metadata_dir = self.log_dir / _METADATA_DIR
        self.topics = TopicRegistry(metadata_dir)
        self.replica_manager = ReplicaManager(config, self.plugins.storage_engines())
        self.producer_ids = ProducerIdManager(metadata_dir / "producer-id-block")
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.topic_ops = TopicOperations(self)
        self.group_coordinator_log = ConsumerOffsetsLog(self)
        self.group_coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(config),
            self.group_coordinator_log,
            assignors=self.plugins.group_assignors(),
            topics=self.topics,
        )
        self.dispatcher = RequestDispatcher(self, self.plugins.api_handlers())
        self.listeners = [parse_listener(uri) for uri in config.listeners]
        self.advertised = [parse_listener(uri) for uri in config.advertised_listeners]
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.connections: set[KafkaConnection] = set()
        self.started_at = time.time()
        self.bound_ports: dict[str, int] = {}

    # -- identity --------------------------------------------------------------------
    def _load_or_create_cluster_id(self) -> str:
        path = self.log_dir / "meta.properties"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith("cluster.id="):
                    return line.split("=", 1)[1].strip()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        text = f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n"
        write_atomically(str(path), text.encode())
        return cluster_id

    def topic_config(self, name: str) -> TopicConfig:
        info = self.topics.get(name)
        return TopicConfig(self.config, {} if info is None else dict(info.configs))

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        for listener in self.advertised:
            if listener.name == listener_name:
                port = listener.port or self.bound_ports.get(listener.name, 0)
                if port == 0:
                    port = self.bound_ports.get(listener.name, 0)
                return listener.host or "127.0.0.1", port
        listener = self.advertised[0]
        return listener.host or "127.0.0.1", listener.port or self.bound_ports.get(listener.name, 0)

    # -- lifecycle -------------------------------------------------------------------
    def open_logs(self) -> None:
        for topic in self.topics:
            topic_config = self.topic_config(topic.name)
            for p in topic.partitions:
                self.replica_manager.make_leader(
                    TopicPartition(topic.name, p.index),
                    topic.topic_id,
                    topic_config,
                    p.leader_epoch,
                    p.replicas,
                    p.isr,
                )

    async def start(self) -> None:
        self.open_logs()
        self.group_coordinator.load()
        self.group_coordinator.start()
        loop = asyncio.get_running_loop()
        max_request = self.config.get_int("socket.request.max.bytes")
        for listener in self.listeners:

            def factory(name: str = listener.name) -> KafkaConnection:
                connection = KafkaConnection(
                    self.dispatcher, max_request, name, on_close=self.connections.discard
                )
                self.connections.add(connection)
                return connection

            server = await loop.create_server(
                factory,
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                backlog=1024,
            )
            for sock in server.sockets:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.bound_ports[listener.name] = server.sockets[0].getsockname()[1]
            self._servers.append(server)
        if any(a.port == 0 for a in self.advertised):
            self.advertised = [
                Listener(a.name, a.host, a.port or self.bound_ports.get(a.name, 0))
                for a in self.advertised
            ]
        self._tasks.append(asyncio.create_task(self._maintenance_loop()))
        self.plugins.broker_startup(self)
        log.info(
            "pydmq node %d serving %s (data in %s, cluster id %s)",
            self.node_id,
            ", ".join(self.config.listeners),
            self.log_dir,
            self.cluster_id,
        )

    async def _maintenance_loop(self) -> None:
        retention_every = self.config.get_int("log.retention.check.interval.ms") / 1000
        checkpoint_every = 5.0
        next_retention = time.monotonic() + retention_every
        while True:
            await asyncio.sleep(min(checkpoint_every, retention_every))
            try:
                await self.replica_manager.checkpoint_changed()
                if time.monotonic() >= next_retention:
                    self.replica_manager.cleanup_logs()
                    next_retention = time.monotonic() + retention_every
                self.fetch_sessions.evict_expired()
            except Exception:
                log.exception("maintenance failed")

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        for task in self._tasks:
            task.cancel()
        self.replica_manager.fetch_purgatory.notify_all()
        self.group_coordinator.stop()
        self.plugins.broker_shutdown(self)
        self.replica_manager.shutdown()
        log.info("pydmq node %d stopped", self.node_id)

    def bootstrap(self) -> str:
        """``host:port`` of the first listener (IPv6 hosts in brackets), for clients."""
        listener = self.listeners[0]
        host = listener.host or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.bound_ports.get(listener.name, listener.port)}"
