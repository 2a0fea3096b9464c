"""Node: the composition root of one pydmq process. Nothing but the entry points imports it
(``pydmq serve``, :mod:`pydmq.testing`'s embedded broker; a layer rule checks it).

It builds every part for the configured roles (``process.roles``) and owns start and stop:

- the plugin host (``pydmq_configure`` first), the data dir and the cluster id
  (``meta.properties``), the listeners (:class:`~pydmq.net.listeners.NodeListeners`);
- the controller role of a cluster-mode voter: the
  :class:`~pydmq.controller.runtime.ControllerRuntime`, whose APIs are served on the
  controller listener(s) by a dispatcher of their own, so a client on a broker listener can
  never reach them (and vice versa);
- the broker role (a single node, or ``broker`` in ``process.roles``): the
  :class:`~pydmq.broker.server.Broker`, with its client and control-plane dispatchers. A
  controller-only node has none: no replica manager, no local metadata log, no group
  coordinator, and neither ``pydmq_broker_startup`` nor ``pydmq_broker_shutdown`` fires.

Start: controller runtime, every listener bound; in cluster mode the controller and
control-plane listeners serve first, then registration, and the client listeners serve only
once the broker is ready (registered, unfenced, the controller's FULL metadata applied: see
:meth:`Node.start`). Stop (SIGTERM): ControlledShutdown to the active controller (given up at
once when the quorum has no majority left), fetchers, then the rest.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydmq.api.dispatcher import RequestDispatcher
from pydmq.broker.handlers.api_versions import unsupported_version_response
from pydmq.broker.server import METADATA_DIR, Broker
from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.config.http import HttpSettings
from pydmq.config.listener_security import security_protocol
from pydmq.net.connection import KafkaConnection
from pydmq.net.connection_quotas import (
    Admission,
    ConnectionLimits,
    ConnectionQuotas,
    descriptor_budget,
    ip_connection_rates,
    limits_from_config,
)
from pydmq.net.connection_rates import ConnectionCreationRates
from pydmq.net.listeners import NodeListeners
from pydmq.plugins.host import PluginHost
from pydmq.security.sasl.protocols import is_sasl_listener
from pydmq.storage.checkpoint import write_atomically

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime
    from pydmq.metadata.records import MetadataRecord
    from pydmq.metrics.service import NodeHttpService
    from pydmq.net.tls import TlsListener
    from pydmq.security.principal import KafkaPrincipal
    from pydmq.security.sasl.credentials import CredentialMap, ScramSeed
    from pydmq.security.sasl.listener import SaslListener
    from pydmq.security.tls import ServerTls

__all__ = ["Node"]

log = logging.getLogger(__name__)

_QUOTA_WARNING_INTERVAL_S = 60.0  # refused connections: one warning a minute at most


class Node:
    """One pydmq node: its roles, listeners and lifecycle (see the module docstring). Owned by
    the event loop it starts on."""

    def __init__(self, config: BrokerConfig, plugins: Iterable[object] = ()) -> None:
        self.config = config
        self.node_id = config.node_id
        self.plugins = PluginHost(plugins)
        self.plugins.configure({d: str(config.get(d)) for d in config.definitions})
        self.log_dir = config.log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # A data directory without metadata yet: --add-scram applies (Kafka formats once).
        self._first_start = not (self.log_dir / METADATA_DIR).exists()
        self.cluster_id = _load_or_create_cluster_id(config)
        self.listeners = NodeListeners(config)
        roles = config.process_roles
        cluster_mode = config.is_cluster_mode
        self.controller: ControllerRuntime | None = None
        if cluster_mode and "controller" in roles:
            from pydmq.controller.runtime import ControllerRuntime

            self.controller = ControllerRuntime(self)
        self.broker: Broker | None = None
        if not cluster_mode or "broker" in roles:
            self.broker = Broker(
                config, self.plugins, self.cluster_id, self.listeners, self.controller
            )
        self.controller_dispatcher: RequestDispatcher[Any] | None = None
        self._controller_listeners: set[str] = set()
        if self.controller is not None:
            specs = self.controller.handler_specs()
            unsupported = (
                self.broker.unsupported_version
                if self.broker is not None
                else lambda: unsupported_version_response(specs)
            )
            # The controller's handlers are bound to the runtime; their context's host is
            # the node.
            self.controller_dispatcher = RequestDispatcher(self, specs, unsupported)
            self._controller_listeners = set(config.controller_listener_names)
        # The server side of every SSL listener, built now so a bad ssl.* setting fails the
        # start (the control-plane listener is known once the broker is built).
        self._server_tls: dict[str, ServerTls] = {}
        names = [item.name for item in self.listeners.listeners]
        if any(security_protocol(config, name) in ("SSL", "SASL_SSL") for name in names):
            from pydmq.security.tls import node_server_tls  # TLS nodes only (start-up time)

            self._server_tls = {
                name: tls for name in names if (tls := node_server_tls(config, name)) is not None
            }
        self.tls_handshake_timeout: float | None = None  # None: TlsListener's default
        self._servers: list[asyncio.base_events.Server | TlsListener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.connections: set[KafkaConnection] = set()
        self.connection_quotas = self._build_connection_quotas()
        self._quota_warned_at = -_QUOTA_WARNING_INTERVAL_S
        # The HTTP listener (metrics, health; pydmq.http.listeners), started with the node.
        self.http: NodeHttpService | None = None
        self.serving_clients = False
        # The SASL listeners' settings, checked now (ConfigError before anything binds).
        self._sasl_listeners = self._build_sasl_listeners()

    def _build_connection_quotas(self) -> ConnectionQuotas:
        """Kafka's connection limits; the listeners the nodes talk to each other on are
        exempt from the all-listeners one (see :mod:`pydmq.net.connection_quotas`)."""
        config = self.config
        exempt = set(self._controller_listeners)
        if config.is_cluster_mode:
            exempt.add(config.inter_broker_listener_name)
            if self.broker is not None and self.broker.control_plane_listener is not None:
                exempt.add(self.broker.control_plane_listener)
        share = config.get("pydmq.log.open.files.share")
        assert isinstance(share, float)
        descriptors = descriptor_budget(share)
        ip_rates: dict[str | None, int] = {}
        seen: list[object] = [None]  # the client quotas ip_rates was read from

        def limits() -> ConnectionLimits:
            quotas = None if self.broker is None else self.broker.quotas.client_quotas
            if quotas is not seen[0]:
                seen[0] = quotas
                ip_rates.clear()
                ip_rates.update(ip_connection_rates(quotas or {}))
            return limits_from_config(config, descriptors, config.listener_limits, ip_rates)

        rates = ConnectionCreationRates(
            config.get_int("quota.window.num"),
            config.get_int("quota.window.size.seconds") * 1000,
            exempt,
        )
        return ConnectionQuotas(limits, exempt, rates)

    def _admit_connection(self, connection: KafkaConnection) -> Admission | None:
        loop = asyncio.get_running_loop()
        verdict = self.connection_quotas.admit(
            connection.connection_id,
            connection.listener,
            connection.client_host,
            int(loop.time() * 1000),
        )
        if verdict is not None and verdict.refusal is not None:
            now = loop.time()
            if now - self._quota_warned_at >= _QUOTA_WARNING_INTERVAL_S:
                self._quota_warned_at = now
                log.warning(
                    "closing new connections: %s (%d refused since start)",
                    verdict.refusal,
                    self.connection_quotas.refused,
                )
        return verdict

    @property
    def sasl_listeners(self) -> Mapping[str, SaslListener]:
        """Listener name -> its SASL authenticator factory, for every SASL listener (what
        the HTTP listener's Basic authentication logs in with)."""
        return self._sasl_listeners

    def _build_sasl_listeners(self) -> dict[str, SaslListener]:
        """Listener name -> its SASL authenticator factory, for every SASL listener."""

        def credentials() -> CredentialMap:
            if self.broker is not None:
                return self.broker.scram_credentials()
            assert self.controller is not None
            return self.controller.image.scram_credentials

        names = [n.name for n in self.listeners.listeners if is_sasl_listener(self.config, n.name)]
        if not names:
            return {}  # and none of the SASL code is imported (start-up time)
        from pydmq.security.sasl.credentials import image_scram_lookup
        from pydmq.security.sasl.listener import SaslListener, SaslListenerSettings

        lookup = image_scram_lookup(credentials)
        wanted = self.config.get_str("pydmq.sasl.oauthbearer.validator")
        validators = self.plugins.oauthbearer_validators()
        if wanted not in validators:
            raise ConfigError(
                f"pydmq.sasl.oauthbearer.validator={wanted}: no plugin registers it "
                f"(registered: {', '.join(sorted(validators))})"
            )
        return {
            name: SaslListener(
                SaslListenerSettings.from_config(self.config, name),
                lookup,
                validators[wanted].factory,
            )
            for name in names
        }

    def seed_scram_credentials(self, seeds: Iterable[ScramSeed]) -> None:
        """Add the ``--add-scram`` users once, as Kafka writes them when it formats the
        storage: a single node at its first start (an empty data directory; a later start
        ignores them with a warning, so a user deleted since is not created again), a
        cluster with the first active controller's bootstrap records. Later users are added
        with AlterUserScramCredentials (``pydmq users add``)."""
        seeds = list(seeds)
        if not seeds:
            return
        records: list[MetadataRecord] = [
            seed.credential.to_record(seed.user, seed.mechanism) for seed in seeds
        ]
        if self.controller is not None:
            # A voter: written by the first active controller of a new cluster, with its
            # metadata.version (Kafka's bootstrap records); ignored by a cluster that exists.
            self.controller.bootstrap_records.extend(records)
            return
        if self.config.is_cluster_mode:
            log.warning("--add-scram ignored: a broker-only node; the controllers seed users")
            return
        if not self._first_start:
            log.warning(
                "--add-scram ignored: %s already holds this node's metadata (users are "
                "seeded at the first start only; use `pydmq users add`)",
                self.log_dir,
            )
            return
        assert self.broker is not None and self.broker.local_controller is not None
        local = self.broker.local_controller
        from pydmq.controller.operations.common import ControllerResult

        local.run_now(lambda image: ControllerResult(records, None))

    @property
    def bound_ports(self) -> dict[str, int]:
        """Listener name -> the port it bound (once started)."""
        return self.listeners.bound_ports

    @property
    def http_ports(self) -> list[int]:
        """The port each HTTP listener bound, in ``pydmq.http.listeners`` order (once
        started; empty when the HTTP listener is off)."""
        return [] if self.http is None else [listener.port for listener in self.http.bound]

    def dispatcher_for(self, listener_name: str) -> RequestDispatcher[Any] | None:
        """Controller listeners get the controller's APIs only; the broker's listeners (client
        and control-plane) the broker's (see :meth:`Broker.dispatcher_for`)."""
        if listener_name in self._controller_listeners:
            return self.controller_dispatcher
        if self.config.is_cluster_mode and listener_name in self.config.controller_listener_names:
            return None  # a controller listener on a node without the controller role
        return None if self.broker is None else self.broker.dispatcher_for(listener_name)

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        """Open the node. Single-node mode: every listener at once. Cluster mode, broker role:
        the controller and control-plane listeners first (without them the node could never
        become ready), then registration, and the client listeners only once the broker is
        ready (:meth:`Broker.join_cluster`). Every port is bound from the start (so
        registration advertises the bound ports), but a client listener refuses connections
        until it serves: an open client port means a ready broker."""
        if self.controller is not None:
            await self.controller.start()
        broker = self.broker
        if broker is not None:
            broker.load()
        servers = await self._bind_listeners()
        self.listeners.advertise_bound_ports()
        if broker is not None:
            self._tasks.append(asyncio.create_task(broker.maintain()))
            if broker.cluster is not None:
                early = {broker.control_plane_listener, *self._controller_listeners}
                await self._start_serving(s for name, s in servers if name in early)
                await self._start_http()  # readiness answers while the broker registers
                await broker.join_cluster()
        await self._start_serving(s for _, s in servers)
        self.serving_clients = True
        if broker is not None:
            broker.serving()
        if self.http is None:
            await self._start_http()
        log.info(
            "pydmq node %d serving %s (data in %s, cluster id %s%s)",
            self.node_id,
            ", ".join(
                [
                    f"{item.name}://{item.host}:{self.bound_ports[item.name]}"
                    for item in self.listeners.listeners
                    if item.name in self.bound_ports
                ]
                + [listener.uri for listener in (self.http.bound if self.http else [])]
            ),
            self.log_dir,
            self.cluster_id,
            f", roles {','.join(sorted(self.config.process_roles))}"
            if self.config.is_cluster_mode
            else "",
        )

    async def _bind_listeners(self) -> list[tuple[str, asyncio.base_events.Server | TlsListener]]:
        """Bind every listener this node serves, without accepting yet (a connection to a
        bound port that does not listen is refused); returns (listener name, server). An SSL
        listener is a :class:`TlsListener` (its handshakes in tasks of their own)."""
        loop = asyncio.get_running_loop()
        max_request = self.config.get_int("socket.request.max.bytes")
        out: list[tuple[str, asyncio.base_events.Server | TlsListener]] = []
        for listener in self.listeners.listeners:
            dispatcher = self.dispatcher_for(listener.name)
            if dispatcher is None:
                continue
            tls = self._server_tls.get(listener.name)
            authenticate = None if tls is None else _authenticate(tls)

            def factory(
                name: str = listener.name,
                dispatcher: RequestDispatcher[Any] = dispatcher,
                authenticate: Callable[[asyncio.BaseTransport], KafkaPrincipal] | None = (
                    authenticate
                ),
            ) -> KafkaConnection:
                connection = KafkaConnection(
                    dispatcher,
                    max_request,
                    name,
                    on_close=self._connection_closed,
                    authenticate=authenticate,
                    admit=self._admit_connection,
                )
                sasl = self._sasl_listeners.get(name)
                if sasl is not None:
                    connection.authenticator = sasl.new_authenticator()
                self.connections.add(connection)
                return connection

            server: asyncio.base_events.Server | TlsListener
            if tls is not None:
                from pydmq.net.tls import TlsListener

                server = TlsListener.bind(listener.name, listener.host, listener.port, tls, factory)
                if self.tls_handshake_timeout is not None:
                    server.handshake_timeout = self.tls_handshake_timeout
            else:
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
    async def _start_serving(
        servers: Iterable[asyncio.base_events.Server | TlsListener],
    ) -> None:
        for server in servers:
            if not server.is_serving():
                await server.start_serving()

    async def _start_http(self) -> None:
        """Start the HTTP listener unless ``pydmq.http.listeners`` is empty; imported only now
        (after the Kafka listeners serve: start-up time)."""
        settings = HttpSettings.from_config(self.config)
        if not settings.listeners:
            return
        from pydmq.metrics.service import NodeHttpService

        service = NodeHttpService(self, settings)
        try:
            await service.start()
        except BaseException:
            await service.stop()
            raise
        self.http = service

    async def stop(self) -> None:
        self.serving_clients = False
        if self.http is not None:
            await self.http.stop()
        broker = self.broker
        if broker is not None:
            await broker.controlled_shutdown()
        for server in self._servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        for task in self._tasks:
            task.cancel()
        if broker is not None:
            await broker.stop_cluster()
        if self.controller is not None:
            with contextlib.suppress(Exception):
                await self.controller.stop()
        if broker is not None:
            broker.close()
        log.info("pydmq node %d stopped", self.node_id)

    def _connection_closed(self, connection: KafkaConnection) -> None:
        self.connections.discard(connection)
        self.connection_quotas.release(connection.connection_id)
        if self.controller is not None and connection.listener in self._controller_listeners:
            self.controller.connection_closed(connection.connection_id)

    def bootstrap(self) -> str:
        """``host:port`` of the first client listener (IPv6 hosts in brackets), for clients."""
        internal = (
            set(self.config.controller_listener_names) if self.config.is_cluster_mode else set()
        )
        if self.broker is not None and self.broker.control_plane_listener is not None:
            internal.add(self.broker.control_plane_listener)
        return self.listeners.bootstrap(internal)


def _load_or_create_cluster_id(config: BrokerConfig) -> str:
    """The id in meta.properties; a configured ``cluster.id`` must match it (Kafka's
    InconsistentClusterIdException)."""
    configured = config.get_str("cluster.id")
    path = config.log_dir / "meta.properties"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("cluster.id="):
                stored = line.split("=", 1)[1].strip()
                if configured and configured != stored:
                    raise ValueError(
                        f"cluster.id {configured!r} does not match {stored!r} in {path}"
                    )
                return stored
    cluster_id = configured or _default_cluster_id(config)
    text = f"version=1\ncluster.id={cluster_id}\nnode.id={config.node_id}\n"
    write_atomically(str(path), text.encode())
    return cluster_id


def _default_cluster_id(config: BrokerConfig) -> str:
    """A cluster's nodes derive the same id from their voters; a single node draws one."""
    if config.is_cluster_mode:
        voters = ",".join(
            f"{i}@{host}:{port}"
            for i, (host, port) in sorted(config.controller_quorum_voters.items())
        )
        digest = hashlib.sha256(f"pydmq-cluster:{voters}".encode()).digest()[:16]
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _authenticate(tls: ServerTls) -> Callable[[asyncio.BaseTransport], KafkaPrincipal]:
    """The authenticate hook of an SSL listener's connections (TLS nodes only)."""
    from pydmq.net.tls import tls_principal

    return tls_principal(tls)
