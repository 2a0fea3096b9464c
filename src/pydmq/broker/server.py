"""Broker: the broker role of one node, built and driven by the node
(:class:`pydmq.node.Node`, the composition root, which owns the listeners and start/stop).

It owns what serves clients: the replica manager and topic registry, the group coordinator,
producer ids, fetch sessions, the way to the controller (:class:`ControllerChannel`,
:class:`TopicCreator`), the handlers' ports (:class:`~pydmq.broker.services.BrokerServices`)
and the dispatchers of the client listeners and, in cluster mode, of the control-plane
listener. It is also the object ``pydmq_broker_startup`` and ``pydmq_broker_shutdown`` receive
(docs/HOOKS.md: ``broker.topics``, ``broker.config``, ``broker.replica_manager``...).

Single-node mode (no ``controller.quorum.voters``): the topic registry is the view of a local
metadata log (:class:`~pydmq.controller.local_log.LocalMetadataLog`, replayed at start) whose
controller is this node's :class:`~pydmq.controller.local.LocalController`, and this node
leads every partition, opened at start.

Cluster mode: :class:`~pydmq.broker.cluster.runtime.BrokerCluster` (registration and
heartbeats, metadata cache, replica fetchers, AlterPartition manager, controller client). The
topic registry is the metadata cache's in-memory one, fed only by UpdateMetadata; partitions
are opened only by LeaderAndIsr. The controller's requests (LeaderAndIsr, StopReplica,
UpdateMetadata) are served only on the control-plane listener (``control.plane.listener.name``,
KIP-291) by a dispatcher of their own that serves nothing else but ApiVersions; client
listeners do not know those keys. Without that listener in ``listeners`` the broker opens one
itself (:meth:`~pydmq.net.listeners.NodeListeners.add_control_plane`); clients never see it:
Metadata answers with the endpoints of the listener the client is connected to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pydmq.api.dispatcher import RequestDispatcher
from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.controller_channel import ControllerChannel
from pydmq.broker.fetch_session import FetchSessionCache
from pydmq.broker.handlers.api_versions import unsupported_version_response
from pydmq.broker.inter_broker import InterBrokerConnections
from pydmq.broker.metadata_publisher import LocalMetadataPublisher
from pydmq.broker.partition_creation import prepare_partitions
from pydmq.broker.services import BrokerServices, MetadataView, ProducerIdSource
from pydmq.broker.single_node_metadata import SingleNodeMetadata
from pydmq.broker.topic_creator import TopicCreator
from pydmq.broker.topics import LocalTopicRegistry, TopicRegistry
from pydmq.broker.txn_markers import RegistryPartitionLeaders, WriteTxnMarkersDelivery
from pydmq.broker.txn_verification import AddPartitionsToTxnManager
from pydmq.cleaner.manager import LogCleanerManager
from pydmq.config.broker import BrokerConfig
from pydmq.config.share import ShareSettings
from pydmq.config.topic import TopicConfig
from pydmq.controller.local import LocalController
from pydmq.controller.local_log import (
    DYNAMIC_BROKER_CONFIGS_FILE,
    LocalMetadataLog,
    convert_dynamic_broker_configs,
)
from pydmq.coordinator.leadership import coordinator_leadership_listener
from pydmq.groups.api import GroupConfig
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.log import OFFSETS_TOPIC, ConsumerOffsetsLog, partition_for
from pydmq.net.listeners import NodeListeners
from pydmq.plugins.builtin import control_plane_handlers
from pydmq.plugins.host import PluginHost
from pydmq.producers.id_manager import ProducerIdManager
from pydmq.quotas.manager import QuotaManagers, QuotaSettings
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.security.authorizer import build_authorizer
from pydmq.shares.coordinator import ShareCoordinator
from pydmq.shares.persister import SharePersister
from pydmq.shares.service import ShareGroupService
from pydmq.shares.state_log import SHARE_GROUP_STATE_TOPIC, ShareStateLog
from pydmq.storage.api import TopicPartition
from pydmq.transactions.api import TransactionConfig
from pydmq.transactions.coordinator import (
    TransactionCoordinator,
)
from pydmq.transactions.log import TRANSACTION_STATE_TOPIC, TransactionStateLog
from pydmq.transactions.markers import TransactionMarkerChannel

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydmq.broker.cluster.runtime import BrokerCluster
    from pydmq.controller.runtime import ControllerRuntime
    from pydmq.metadata.image import ScramCredentialData

__all__ = ["METADATA_DIR", "Broker"]

log = logging.getLogger(__name__)
# Under log.dirs: this node's metadata (the local metadata log, producer id blocks, the
# Raft log of a voter).
METADATA_DIR = "__pydmq_metadata"
_METADATA_LOG_DIR = "metadata-log"
_CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
# High watermarks are checkpointed every 5 s (Kafka's replica.high.watermark.checkpoint.
# interval.ms), producer snapshots every 60 s (Kafka's recovery-point cadence,
# log.flush.offset.checkpoint.interval.ms; Kafka itself snapshots at segment roll). Under a
# write load each fsync forces a journal commit that can stall segment appends on the event
# loop; a kill -9 replays at most 60 s of batch headers to rebuild the producer state.
_PRODUCER_SNAPSHOT_EVERY_S = 60.0


class Broker:
    """The broker role of one node (see the module docstring). Built by the node; owned by
    its event loop."""

    def __init__(
        self,
        config: BrokerConfig,
        plugins: PluginHost,
        cluster_id: str,
        listeners: NodeListeners,
        controller: ControllerRuntime | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.plugins = plugins
        # What requests may do (None: authorizer.class.name is empty, everything allowed);
        # given the metadata's ACLs by whoever follows it.
        self.authorizer = build_authorizer(config, plugins.authorizers())
        self.cluster_id = cluster_id
        self.log_dir: Path = config.log_dir
        self.listeners = listeners
        self.advertised_endpoint = listeners.advertised_endpoint
        # This node's controller role in cluster mode (a combined node), else None.
        self.controller = controller
        metadata_dir = self.log_dir / METADATA_DIR
        self.replica_manager = ReplicaManager(
            config, plugins.storage_engines(), plugins.replication_strategies()
        )
        self.log_cleaner: LogCleanerManager | None = None  # started by load()
        # Cluster mode: the broker role's cluster part; single-node mode: the node is its own
        # controller, over a local metadata log.
        self.cluster: BrokerCluster | None = None
        self.local_controller: LocalController | None = None
        self.topics: TopicRegistry
        # The listener serving the controller's pushes (cluster mode only).
        self.control_plane_listener: str | None = None
        self.control_plane_dispatcher: RequestDispatcher[BrokerServices] | None = None
        if config.is_cluster_mode:
            # Imported only in cluster mode: a single node's start-up does not pay for it.
            from pydmq.broker.cluster.runtime import BrokerCluster

            self.cluster = BrokerCluster(self)
            self.replica_manager.attach_cluster(
                self.cluster.metadata_cache, self.cluster.alter_partition.wake
            )
            self.topics = self.cluster.metadata_cache.topics
        else:
            local = self._local_controller(metadata_dir)
            self.topics = LocalTopicRegistry(local, metadata_dir)  # its first listener
            rack = config.get("broker.rack")
            local.register_node(self.node_id, None if rack is None else str(rack))
            local.bootstrap_features()
            local.add_listener(LocalMetadataPublisher(self).publish)
            self.local_controller = local
            if self.authorizer is not None:
                self.authorizer.update_acls(local.image.acls)
        # Admin requests go to the controller: the active one, or this node's in process.
        self.controller_channel = ControllerChannel(self, self.local_controller)
        self.topic_creator = TopicCreator(self, self.local_controller)
        self.producer_ids = ProducerIdManager(metadata_dir / "producer-id-block")
        # Client quotas: a single node's from its image now, a cluster broker's from the
        # controller's UpdateMetadata; both as each change is applied.
        self.quotas = QuotaManagers(
            QuotaSettings(
                config.get_int("quota.window.num"), config.get_int("quota.window.size.seconds")
            ),
            QuotaSettings(
                config.get_int("controller.quota.window.num"),
                config.get_int("controller.quota.window.size.seconds"),
            ),
        )
        if self.local_controller is not None:
            self.quotas.update(self.local_controller.image.client_quotas)
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.group_coordinator_log = ConsumerOffsetsLog(self)
        self.group_coordinator = GroupCoordinator(
            GroupConfig.from_broker_config(config),
            self.group_coordinator_log,
            assignors=plugins.group_assignors(),
            topics=self.topics,
        )
        self.transaction_state_log = TransactionStateLog(self)
        # Markers go to partition leaders as WriteTxnMarkers requests: in process to this
        # broker's own handler for key 27, over the inter-broker listener to the others.
        # How this broker authenticates to the others' inter-broker listener (cluster mode).
        self.inter_broker_sasl = None
        if config.is_cluster_mode:
            from pydmq.security.sasl.listener import node_sasl_client

            self.inter_broker_sasl = node_sasl_client(
                config, config.inter_broker_listener_name, "sasl.mechanism.inter.broker.protocol"
            )
        # Share-partition state lives with the share coordinators (__share_group_state
        # leaders): this node's in process, the others' over the inter-broker listener.
        self.share_state_log = ShareStateLog(self)
        self.share_coordinator = ShareCoordinator(
            self.share_state_log, owns_all_partitions=self.cluster is None
        )
        share_connections = (
            None
            if self.cluster is None
            else InterBrokerConnections(
                lambda: self.services.metadata,
                config.inter_broker_listener_name,
                "share-state",
                self.cluster.inter_broker_ssl,
                self.inter_broker_sasl,
            )
        )
        self.share_persister = SharePersister(
            self.node_id, self.share_coordinator, self._share_state_leader, share_connections
        )
        self.share_groups = ShareGroupService(
            ShareSettings.from_config(config),
            self.replica_manager,
            self._share_topic_partitions,
            self.share_persister,
            group_config=self.group_config,
            topic_registry=self.topics,
            remote=share_connections,
        )
        self.txn_marker_delivery = WriteTxnMarkersDelivery(
            self.node_id,
            lambda: self.services,
            lambda: self.services.metadata,
            config.inter_broker_listener_name,
            None if self.cluster is None else self.cluster.inter_broker_ssl,
            self.inter_broker_sasl,
        )
        offsets_log = self.group_coordinator_log
        self.transaction_coordinator = TransactionCoordinator(
            TransactionConfig.from_broker_config(config),
            self.transaction_state_log,
            self.cluster.producer_ids if self.cluster is not None else self.producer_ids,
            TransactionMarkerChannel(
                RegistryPartitionLeaders(self.topics), self.txn_marker_delivery
            ),
            lambda group_id: partition_for(group_id, offsets_log.num_partitions),
            owns_all_partitions=self.cluster is None,
        )
        # A transaction's first batch per partition is verified with its coordinator
        # (KIP-890 part 1): in process when it is this node, else over the inter-broker
        # listener.
        self.txn_verification = AddPartitionsToTxnManager(
            self.node_id,
            config,
            self.transaction_coordinator,
            self.transaction_state_log,
            RegistryPartitionLeaders(self.topics),
            None
            if self.cluster is None
            else InterBrokerConnections(
                lambda: self.services.metadata,
                config.inter_broker_listener_name,
                "txn-verification",
                self.cluster.inter_broker_ssl,
                self.inter_broker_sasl,
            ),
        )
        self.replica_manager.txn_verifier = self.txn_verification
        if self.cluster is not None:
            # __consumer_offsets leadership makes this broker a group coordinator (or not),
            # __transaction_state a transaction coordinator, __share_group_state a share
            # coordinator.
            for topic, coordinator in (
                (OFFSETS_TOPIC, self.group_coordinator),
                (TRANSACTION_STATE_TOPIC, self.transaction_coordinator),
                (SHARE_GROUP_STATE_TOPIC, self.share_coordinator),
            ):
                self.cluster.leadership_listeners.append(
                    coordinator_leadership_listener(topic, coordinator, self.replica_manager)
                )
        self.services = self._services()
        handlers = dict(plugins.api_handlers())
        # The answer to an unsupported ApiVersions version on any listener of the node.
        self.unsupported_version = partial(unsupported_version_response, handlers)
        self.dispatcher = RequestDispatcher(
            self.services,
            handlers,
            self.unsupported_version,
            request_quota=self.quotas.request,
            exempt_listeners=frozenset(
                () if self.cluster is None else (config.inter_broker_listener_name,)
            ),
        )
        if self.cluster is not None:
            name = config.control_plane_listener_name
            listeners.add_control_plane(name, config.inter_broker_listener_name)
            self.control_plane_listener = name
            specs = {spec.api_key: spec for spec in control_plane_handlers()}
            self.control_plane_dispatcher = RequestDispatcher(
                self.services, specs, self.unsupported_version
            )

    def _local_controller(self, metadata_dir: Path) -> LocalController:
        """A single node's controller over its local metadata log, replayed now (the node's
        dynamic broker configs installed from its image)."""
        config = self.config
        metadata_log = LocalMetadataLog(
            metadata_dir / _METADATA_LOG_DIR,
            snapshot_interval_records=config.get_int("metadata.log.max.snapshot.interval.records"),
        )
        convert_dynamic_broker_configs(
            metadata_log, metadata_dir / DYNAMIC_BROKER_CONFIGS_FILE, self.node_id
        )
        image = metadata_log.image
        config.set_dynamic(image.broker_config(""), image.broker_config(str(self.node_id)))
        return LocalController(
            metadata_log, config, self.plugins, partial(prepare_partitions, self)
        )

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
            local = self.local_controller
            assert local is not None  # a single node has its local controller
            metadata = SingleNodeMetadata(
                self.node_id,
                None if rack is None else str(rack),
                self.advertised_endpoint,
                lambda: local.image,
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
            transaction_coordinator=self.transaction_coordinator,
            transaction_state_log=self.transaction_state_log,
            controller_channel=self.controller_channel,
            topic_creator=self.topic_creator,
            producer_ids=producer_ids,
            fetch_sessions=self.fetch_sessions,
            share_groups=self.share_groups,
            share_coordinator=self.share_coordinator,
            advertised_endpoint=self.advertised_endpoint,
            inter_broker_listener=None if cluster is None else cluster.inter_broker_listener,
            served_apis=self.served_apis,
            control_plane=cluster,
            authorizer=self.authorizer,
            quotas=self.quotas,
            scram_credentials=self.scram_credentials,
        )

    def _share_topic_partitions(self, name: str) -> tuple[uuid.UUID, int] | None:
        """A topic a share group subscribes to: its id and partition count (None: unknown or
        internal)."""
        info = self.topics.get(name)
        if info is None or info.internal:
            return None
        return info.topic_id, len(info.partitions)

    def _share_state_leader(self, partition: int) -> int:
        """The leader of ``__share_group_state`` partition ``partition`` (-1: none known)."""
        topic = self.topics.get(SHARE_GROUP_STATE_TOPIC)
        if topic is None:
            return -1
        return next((p.leader for p in topic.partitions if p.index == partition), -1)

    def group_config(self, group_id: str) -> Mapping[str, str]:
        """The configs set on GROUP resource ``group_id`` (ConfigRecords of type 32): a
        single node's metadata log, a cluster broker's metadata cache (from the controller's
        UpdateMetadata)."""
        if self.local_controller is not None:
            return self.local_controller.image.group_config(group_id)
        assert self.cluster is not None
        return self.cluster.metadata_cache.group_configs.get(group_id, {})

    def scram_credentials(self) -> Mapping[tuple[str, int], ScramCredentialData]:
        """Users' SCRAM credentials as this node's metadata has them: a single node's
        metadata log, a cluster broker's metadata cache (from the controller's pushes)."""
        if self.local_controller is not None:
            return self.local_controller.image.scram_credentials
        assert self.cluster is not None
        return self.cluster.metadata_cache.scram_credentials

    def served_apis(self, listener_name: str | None) -> dict[int, ApiHandlerSpec]:
        """The APIs a listener serves (the client listeners' when None), for ApiVersions."""
        if listener_name is not None and listener_name == self.control_plane_listener:
            assert self.control_plane_dispatcher is not None
            return self.control_plane_dispatcher.handlers
        return self.dispatcher.handlers

    def dispatcher_for(self, listener_name: str) -> RequestDispatcher[BrokerServices]:
        """The control-plane listener gets the controller-to-broker APIs only; the others
        (client listeners) the broker's."""
        if listener_name == self.control_plane_listener:
            assert self.control_plane_dispatcher is not None
            return self.control_plane_dispatcher
        return self.dispatcher

    def topic_config(self, name: str) -> TopicConfig:
        info = self.topics.get(name)
        return TopicConfig(self.config, {} if info is None else dict(info.configs))

    # -- lifecycle (driven by the node) -----------------------------------------------
    def open_logs(self) -> None:
        # In (topic, partition) order: the order the segment engine scans ahead in after an
        # unclean shutdown (pydmq.engines.segment.prescan).
        for topic in sorted(self.topics, key=lambda t: t.name):
            topic_config = self.topic_config(topic.name)
            for p in sorted(topic.partitions, key=lambda p: p.index):
                self.replica_manager.make_leader(
                    TopicPartition(topic.name, p.index),
                    topic.topic_id,
                    topic_config,
                    p.leader_epoch,
                    p.replicas,
                    p.isr,
                )

    def load(self) -> None:
        """Before any listener serves, on the event loop: a single node opens every partition
        (in cluster mode LeaderAndIsr opens them); the group and transaction coordinators load
        and start; the log cleaner's threads start (they reach the logs only through this
        loop)."""
        if self.cluster is None:
            self.open_logs()
        self.group_coordinator.load()
        self.group_coordinator.start()
        self.transaction_coordinator.load()
        self.transaction_coordinator.start()
        self.share_coordinator.load()
        self.log_cleaner = LogCleanerManager.on_loop(
            self.config.cleaner_settings, self.replica_manager.logs, asyncio.get_running_loop()
        )
        self.log_cleaner.start()

    async def join_cluster(self) -> None:
        """Cluster mode, once the controller and control-plane listeners serve: register, and
        return once ready (:meth:`BrokerCluster.wait_ready`: registered, unfenced, the
        controller's FULL metadata applied), as Kafka's BrokerServer starts its data-plane
        acceptors only once caught up. A single node is ready at once."""
        cluster = self.cluster
        if cluster is None:
            return
        cluster.start()  # registration: the listeners are bound by now
        started = time.monotonic()
        await cluster.wait_ready()
        log.info(
            "broker %d is ready after %.3f s (registered with epoch %d, unfenced, "
            "metadata at offset %d): opening the client listeners",
            self.node_id,
            time.monotonic() - started,
            cluster.broker_epoch,
            cluster.metadata_cache.metadata_offset,
        )

    def serving(self) -> None:
        """Every listener serves: the start-up state is what ``pydmq_broker_startup`` sees,
        and from now on the topic hooks fire (BrokerCluster._fire_topic_hooks). Nothing may
        await between this and the hook."""
        if self.cluster is not None:
            self.cluster.topic_hooks_enabled = True
        self.plugins.broker_startup(self)

    async def maintain(self) -> None:
        """Log maintenance until cancelled: checkpoints, producer snapshots, retention, and
        the expiry of fetch sessions."""
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
                self.share_groups.expire_members()
            except Exception:
                log.exception("maintenance failed")

    async def controlled_shutdown(self) -> None:
        """Cluster mode, while still serving: leadership moves away so clients fail over
        without waiting for the session timeout (Kafka's controlled shutdown); the replica
        fetchers stop."""
        cluster = self.cluster
        if cluster is None:
            return
        with contextlib.suppress(Exception):
            await cluster.controlled_shutdown(_CONTROLLED_SHUTDOWN_TIMEOUT_S)
        await cluster.fetchers.shutdown()

    async def stop_cluster(self) -> None:
        """Cluster mode, once no listener serves: heartbeats and the cluster tasks stop, and
        the connections of the transaction markers and verifications close."""
        if self.cluster is not None:
            await self.cluster.stop()
            await self.txn_marker_delivery.close()
            await self.txn_verification.close()
            await self.share_persister.close()

    def close(self) -> None:
        """Last: waiters woken, the group and transaction coordinators stopped, ``pydmq_broker_shutdown``,
        the log cleaner stopped, then the logs and the local metadata log closed."""
        self.replica_manager.wake_waiters()
        self.group_coordinator.stop()
        self.transaction_coordinator.stop()
        self.share_coordinator.stop()
        self.plugins.broker_shutdown(self)
        if self.log_cleaner is not None:
            self.log_cleaner.stop()  # before the logs close
        self.replica_manager.shutdown()
        if self.local_controller is not None:
            self.local_controller.metadata_log.close()
