"""Broker: the composition root of one node. Builds the plugin host, the storage engines, the
replica manager and topic registry, opens listeners and runs log maintenance.

Single-node mode (no ``controller.quorum.voters``): the topic registry is the view of a local
metadata log (:class:`~pydmq.controller.local_log.LocalMetadataLog`, replayed at start) and
this node leads every partition, opened at start.

Cluster mode is decided here, once, from the configuration (docs/CLUSTER.md):

- the ``controller`` role builds the :class:`~pydmq.controller.runtime.ControllerRuntime`,
  whose APIs are served on the controller listener(s) by a dispatcher of their own, so a
  client on a broker listener can never reach them (and vice versa);
- the ``broker`` role builds :class:`~pydmq.broker.cluster.runtime.BrokerCluster`
  (registration and heartbeats, metadata cache, replica fetchers, AlterPartition manager,
  controller client). The topic registry is the metadata cache's in-memory one, fed only by
  UpdateMetadata; partitions are opened only by LeaderAndIsr. The controller's requests
  (LeaderAndIsr, StopReplica, UpdateMetadata) are served only on the control-plane listener
  (``control.plane.listener.name``, KIP-291) by a dispatcher of their own that serves nothing
  else but ApiVersions; client listeners do not know those keys. Without that listener in
  ``listeners`` the broker opens one itself on the inter-broker listener's host at an
  ephemeral port, and registers it under the control-plane name (clients never see it:
  Metadata answers with the endpoints of the listener the client is connected to).

Start: controller runtime, every listener bound; in cluster mode the controller and
control-plane listeners serve first, then registration, and the client listeners serve only
once the broker is ready (registered, unfenced, the controller's FULL metadata applied: see
:meth:`Broker.start`). Stop (SIGTERM): ControlledShutdown to the active controller (given up
at once when the quorum has no majority left), fetchers, then the rest.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydmq.api.dispatcher import RequestDispatcher
from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.controller_channel import ControllerChannel
from pydmq.broker.fetch_session import FetchSessionCache
from pydmq.broker.handlers.api_versions import unsupported_version_response
from pydmq.broker.metadata_publisher import LocalMetadataPublisher
from pydmq.broker.partition_creation import prepare_partitions
from pydmq.broker.services import BrokerServices, MetadataView, ProducerIdSource
from pydmq.broker.single_node_metadata import SingleNodeMetadata
from pydmq.broker.topic_creator import TopicCreator
from pydmq.broker.topics import LocalTopicRegistry, TopicRegistry
from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.controller.local import LocalController
from pydmq.controller.local_log import (
    DYNAMIC_BROKER_CONFIGS_FILE,
    LocalMetadataLog,
    convert_dynamic_broker_configs,
)
from pydmq.groups.api import GroupConfig
from pydmq.groups.coordinator import GroupCoordinator, offsets_leadership_listener
from pydmq.groups.log import ConsumerOffsetsLog
from pydmq.net.connection import KafkaConnection
from pydmq.plugins.builtin import control_plane_handlers
from pydmq.plugins.host import PluginHost
from pydmq.producers.id_manager import ProducerIdManager
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.storage.api import TopicPartition
from pydmq.storage.checkpoint import write_atomically

if TYPE_CHECKING:
    from pydmq.broker.cluster.runtime import BrokerCluster
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["Broker", "Listener", "parse_listener"]

log = logging.getLogger(__name__)
_METADATA_DIR = "__pydmq_metadata"
_METADATA_LOG_DIR = "metadata-log"
_CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
# High watermarks are checkpointed every 5 s (Kafka's replica.high.watermark.checkpoint.
# interval.ms), producer snapshots every 60 s (Kafka's recovery-point cadence,
# log.flush.offset.checkpoint.interval.ms; Kafka itself snapshots at segment roll). Under a
# write load each fsync forces a journal commit that can stall segment appends on the event
# loop; a kill -9 replays at most 60 s of batch headers to rebuild the producer state.
_PRODUCER_SNAPSHOT_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class Listener:
    """A parsed listener URI: ``NAME://host:port``."""

    name: str
    host: str
    port: int


def parse_listener(uri: str) -> Listener:
    """``NAME://host:port``; names may hold ``_`` (``CONTROL_PLANE``), which URL schemes
    may not, so the name is split off before the address is parsed."""
    name, sep, address = uri.partition("://")
    parts = urlsplit(f"//{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not (sep and name) or port is None:
        raise ValueError(f"listener {uri!r} must look like PLAINTEXT://host:port")
    return Listener(name.strip().upper(), parts.hostname or "", port)


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
        roles = config.process_roles
        self.cluster_mode = config.is_cluster_mode
        self.has_broker_role = not self.cluster_mode or "broker" in roles
        self.replica_manager = ReplicaManager(
            config, self.plugins.storage_engines(), self.plugins.replication_strategies()
        )
        self.listeners = [parse_listener(uri) for uri in config.listeners]
        self.advertised = [parse_listener(uri) for uri in config.advertised_listeners]
        # Cluster mode: the broker role (None in single-node mode or on a controller-only node)
        # and the controller role (None unless this node is a voter with that role).
        self.cluster: BrokerCluster | None = None
        self.controller: ControllerRuntime | None = None
        self.controller_dispatcher: RequestDispatcher[BrokerServices] | None = None
        self._controller_listeners: set[str] = set()
        # The listener serving the controller's pushes (broker role in cluster mode only).
        self.control_plane_dispatcher: RequestDispatcher[BrokerServices] | None = None
        self.control_plane_listener: str | None = None
        self.topics: TopicRegistry
        # Single-node mode: the node is its own controller, over a local metadata log.
        self.local_controller: LocalController | None = None
        if self.cluster_mode and self.has_broker_role:
            # Imported only in cluster mode: a single node's start-up does not pay for it.
            from pydmq.broker.cluster.runtime import BrokerCluster

            self.cluster = BrokerCluster(self)
            self.replica_manager.attach_cluster(
                self.cluster.metadata_cache, self.cluster.alter_partition.wake
            )
            self.topics = self.cluster.metadata_cache.topics
        else:
            metadata_log = LocalMetadataLog(
                metadata_dir / _METADATA_LOG_DIR,
                snapshot_interval_records=config.get_int(
                    "metadata.log.max.snapshot.interval.records"
                ),
            )
            convert_dynamic_broker_configs(
                metadata_log, metadata_dir / DYNAMIC_BROKER_CONFIGS_FILE, self.node_id
            )
            image = metadata_log.image
            config.set_dynamic(image.broker_config(""), image.broker_config(str(self.node_id)))
            controller = LocalController(
                metadata_log, config, self.plugins, partial(prepare_partitions, self)
            )
            registry = LocalTopicRegistry(controller, metadata_dir)  # its first listener
            rack = config.get("broker.rack")
            controller.register_node(self.node_id, None if rack is None else str(rack))
            controller.add_listener(LocalMetadataPublisher(self).publish)
            self.local_controller = controller
            self.topics = registry
        # Admin requests go to the controller: the active one, or this node's in process.
        self.controller_channel = ControllerChannel(self, self.local_controller)
        self.topic_creator = TopicCreator(self, self.local_controller)
        self.producer_ids = ProducerIdManager(metadata_dir / "producer-id-block")
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.group_coordinator_log = ConsumerOffsetsLog(self)
        self.group_coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(config),
            self.group_coordinator_log,
            assignors=self.plugins.group_assignors(),
            topics=self.topics,
        )
        if self.cluster is not None:
            # __consumer_offsets leadership makes this broker a group coordinator (or not).
            self.cluster.leadership_listeners.append(
                offsets_leadership_listener(self.group_coordinator, self.replica_manager)
            )
        self.services = self._services()
        handlers = dict(self.plugins.api_handlers())
        unsupported = partial(unsupported_version_response, self.services)
        self.dispatcher = RequestDispatcher(self.services, handlers, unsupported)
        if self.cluster is not None:
            self._add_control_plane_listener()
            specs = {spec.api_key: spec for spec in control_plane_handlers()}
            self.control_plane_dispatcher = RequestDispatcher(self.services, specs, unsupported)
        if self.cluster_mode and "controller" in roles:
            from pydmq.controller.runtime import ControllerRuntime

            self.controller = ControllerRuntime(self)
            self.controller_dispatcher = RequestDispatcher(
                self.services, self.controller.handler_specs(), unsupported
            )
            self._controller_listeners = set(config.controller_listener_names)
        self._servers: list[asyncio.base_events.Server] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.connections: set[KafkaConnection] = set()
        self.started_at = time.time()
        self.bound_ports: dict[str, int] = {}

    def _services(self) -> BrokerServices:
        """The handlers' ports: in cluster mode the metadata cache's view, the controller's
        producer id blocks and the control plane; on a single node, itself."""
        cluster = self.cluster
        metadata: MetadataView
        producer_ids: ProducerIdSource
        if cluster is not None:
            from pydmq.broker.cluster.metadata_view import ClusterMetadataView

            metadata = ClusterMetadataView(cluster.metadata_cache)
            producer_ids = cluster.producer_ids
        else:
            rack = self.config.get("broker.rack")
            metadata = SingleNodeMetadata(
                self.node_id, None if rack is None else str(rack), self.advertised_endpoint
            )
            producer_ids = self.producer_ids
        return BrokerServices(
            config=self.config,
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            log_dir=self.log_dir,
            topics=self.topics,
            metadata=metadata,
            replica_manager=self.replica_manager,
            group_coordinator=self.group_coordinator,
            group_coordinator_log=self.group_coordinator_log,
            controller_channel=self.controller_channel,
            topic_creator=self.topic_creator,
            producer_ids=producer_ids,
            fetch_sessions=self.fetch_sessions,
            advertised_endpoint=self.advertised_endpoint,
            inter_broker_listener=None if cluster is None else cluster.inter_broker_listener,
            served_apis=self.served_apis,
            control_plane=cluster,
        )

    def served_apis(self, listener_name: str | None) -> Mapping[int, ApiHandlerSpec]:
        """The APIs a listener serves (the client listeners' when None), for ApiVersions."""
        dispatcher = (
            self.dispatcher if listener_name is None else self.dispatcher_for(listener_name)
        )
        return (dispatcher or self.dispatcher).handlers

    def _add_control_plane_listener(self) -> None:
        """Bind and advertise the control-plane listener (see the module docstring).

        Not in ``listeners``: opened on the inter-broker listener's host, ephemeral port. Not
        in ``advertised.listeners``: registered on the inter-broker listener's advertised host
        and the bound port, so the controllers can reach it wherever the others are reached.
        """
        name = self.config.control_plane_listener_name
        self.control_plane_listener = name
        inter_broker = self.config.inter_broker_listener_name
        if not any(item.name == name for item in self.listeners):
            bind = next((item for item in self.listeners if item.name == inter_broker), None)
            if bind is None:
                raise ValueError(f"inter.broker.listener.name {inter_broker} is not in listeners")
            self.listeners.append(Listener(name, bind.host, 0))
        if not any(item.name == name for item in self.advertised):
            bound = next(item for item in self.listeners if item.name == name)
            peers = next((a for a in self.advertised if a.name == inter_broker), bound)
            self.advertised.append(Listener(name, peers.host, bound.port))

    # -- identity --------------------------------------------------------------------
    def _load_or_create_cluster_id(self) -> str:
        """The id in meta.properties; a configured ``cluster.id`` must match it (Kafka's
        InconsistentClusterIdException)."""
        configured = self.config.get_str("cluster.id")
        path = self.log_dir / "meta.properties"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith("cluster.id="):
                    stored = line.split("=", 1)[1].strip()
                    if configured and configured != stored:
                        raise ValueError(
                            f"cluster.id {configured!r} does not match {stored!r} in {path}"
                        )
                    return stored
        cluster_id = configured or self._default_cluster_id()
        text = f"version=1\ncluster.id={cluster_id}\nnode.id={self.node_id}\n"
        write_atomically(str(path), text.encode())
        return cluster_id

    def _default_cluster_id(self) -> str:
        if self.config.is_cluster_mode:
            voters = ",".join(
                f"{i}@{host}:{port}"
                for i, (host, port) in sorted(self.config.controller_quorum_voters.items())
            )
            digest = hashlib.sha256(f"pydmq-cluster:{voters}".encode()).digest()[:16]
            return base64.urlsafe_b64encode(digest).decode().rstrip("=")
        return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")

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
        """Open the node. Single-node mode: every listener at once. Cluster mode, broker role:
        the controller and control-plane listeners first (without them the node could never
        become ready), then registration, and the client listeners only once the broker is
        ready (:meth:`BrokerCluster.wait_ready`: registered, unfenced, the controller's FULL
        metadata applied), as Kafka's BrokerServer starts its data-plane acceptors only once
        caught up. Every port is bound from the start (so registration advertises the bound
        ports), but a client listener refuses connections until it serves: an open client
        port means a ready broker."""
        if self.controller is not None:
            await self.controller.start()
        if self.cluster is None and self.has_broker_role:
            self.open_logs()  # single-node mode; in cluster mode LeaderAndIsr opens partitions
        self.group_coordinator.load()
        self.group_coordinator.start()
        servers = await self._bind_listeners()
        if any(a.port == 0 for a in self.advertised):
            self.advertised = [
                Listener(a.name, a.host, a.port or self.bound_ports.get(a.name, 0))
                for a in self.advertised
            ]
        self._tasks.append(asyncio.create_task(self._maintenance_loop()))
        if self.cluster is not None:
            early = {self.control_plane_listener, *self._controller_listeners}
            await self._start_serving(s for name, s in servers if name in early)
            self.cluster.start()  # registration: the listeners are bound by now
            started = time.monotonic()
            await self.cluster.wait_ready()
            log.info(
                "broker %d is ready after %.3f s (registered with epoch %d, unfenced, "
                "metadata at offset %d): opening the client listeners",
                self.node_id,
                time.monotonic() - started,
                self.cluster.broker_epoch,
                self.cluster.metadata_cache.metadata_offset,
            )
        await self._start_serving(s for _, s in servers)
        if self.cluster is not None:
            # Nothing awaits from here to the hook: it sees every topic known before the
            # topic hooks start to fire (BrokerCluster._fire_topic_hooks).
            self.cluster.topic_hooks_enabled = True
        self.plugins.broker_startup(self)
        log.info(
            "pydmq node %d serving %s (data in %s, cluster id %s%s)",
            self.node_id,
            ", ".join(
                f"{item.name}://{item.host}:{self.bound_ports[item.name]}"
                for item in self.listeners
                if item.name in self.bound_ports
            ),
            self.log_dir,
            self.cluster_id,
            f", roles {','.join(sorted(self.config.process_roles))}" if self.cluster_mode else "",
        )

    async def _bind_listeners(self) -> list[tuple[str, asyncio.base_events.Server]]:
        """Bind every listener this node serves, without accepting yet (a connection to a
        bound port that does not listen is refused); returns (listener name, server)."""
        loop = asyncio.get_running_loop()
        max_request = self.config.get_int("socket.request.max.bytes")
        out: list[tuple[str, asyncio.base_events.Server]] = []
        for listener in self.listeners:
            dispatcher = self.dispatcher_for(listener.name)
            if dispatcher is None:
                continue

            def factory(
                name: str = listener.name,
                dispatcher: RequestDispatcher[BrokerServices] = dispatcher,
            ) -> KafkaConnection:
                connection = KafkaConnection(
                    dispatcher, max_request, name, on_close=self._connection_closed
                )
                self.connections.add(connection)
                return connection

            server = await loop.create_server(
                factory,
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                backlog=1024,
                start_serving=False,
            )
            for sock in server.sockets:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.bound_ports[listener.name] = server.sockets[0].getsockname()[1]
            self._servers.append(server)
            out.append((listener.name, server))
        return out

    @staticmethod
    async def _start_serving(servers: Iterable[asyncio.base_events.Server]) -> None:
        for server in servers:
            if not server.is_serving():
                await server.start_serving()

    def dispatcher_for(self, listener_name: str) -> RequestDispatcher[BrokerServices] | None:
        """Controller listeners get the controller's APIs only, the control-plane listener
        the controller-to-broker APIs only; the others (client listeners) the broker's."""
        if listener_name in self._controller_listeners:
            return self.controller_dispatcher
        if self.cluster_mode and listener_name in self.config.controller_listener_names:
            return None  # a controller listener on a node without the controller role
        if listener_name == self.control_plane_listener:
            return self.control_plane_dispatcher
        return self.dispatcher if self.has_broker_role else None

    async def _maintenance_loop(self) -> None:
        retention_every = self.config.get_int("log.retention.check.interval.ms") / 1000
        checkpoint_every = 5.0
        next_retention = time.monotonic() + retention_every
        next_snapshot = time.monotonic() + _PRODUCER_SNAPSHOT_EVERY_S
        while True:
            await asyncio.sleep(min(checkpoint_every, retention_every))
            try:
                snapshots = time.monotonic() >= next_snapshot
                await self.replica_manager.checkpoint_changed(producer_snapshots=snapshots)
                if snapshots:
                    next_snapshot = time.monotonic() + _PRODUCER_SNAPSHOT_EVERY_S
                if time.monotonic() >= next_retention:
                    self.replica_manager.cleanup_logs()
                    next_retention = time.monotonic() + retention_every
                self.fetch_sessions.evict_expired()
            except Exception:
                log.exception("maintenance failed")

    async def stop(self) -> None:
        cluster = self.cluster
        if cluster is not None:
            # Leadership moves away while this broker still serves, so clients fail over
            # without waiting for the session timeout (Kafka's controlled shutdown).
            with contextlib.suppress(Exception):
                await cluster.controlled_shutdown(_CONTROLLED_SHUTDOWN_TIMEOUT_S)
            await cluster.fetchers.shutdown()
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        for task in self._tasks:
            task.cancel()
        if cluster is not None:
            await cluster.stop()
        if self.controller is not None:
            with contextlib.suppress(Exception):
                await self.controller.stop()
        self.replica_manager.wake_waiters()
        self.group_coordinator.stop()
        self.plugins.broker_shutdown(self)
        self.replica_manager.shutdown()
        if self.local_controller is not None:
            self.local_controller.metadata_log.close()
        log.info("pydmq node %d stopped", self.node_id)

    def _connection_closed(self, connection: KafkaConnection) -> None:
        self.connections.discard(connection)
        if self.controller is not None and connection.listener in self._controller_listeners:
            self.controller.connection_closed(connection.connection_id)

    def bootstrap(self) -> str:
        """``host:port`` of the first client listener (IPv6 hosts in brackets), for clients."""
        internal = set(self.config.controller_listener_names) if self.cluster_mode else set()
        if self.control_plane_listener is not None:
            internal.add(self.control_plane_listener)
        listener = next(
            (item for item in self.listeners if item.name not in internal),
            self.listeners[0],
        )
        host = listener.host or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.bound_ports.get(listener.name, listener.port)}"
