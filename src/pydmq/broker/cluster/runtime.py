"""BrokerCluster: the broker role of a cluster-mode node.

Composes what a broker needs to be driven by the controller: the metadata cache (fed by
UpdateMetadata), registration and heartbeats, the replica fetchers, the AlterPartition
manager and the client that reaches the active controller. It applies the controller's
LeaderAndIsr (key 4), StopReplica (key 5) and UpdateMetadata (key 6) requests to the replica
manager (they arrive on the control-plane listener only), fencing them as
:mod:`pydmq.broker.cluster.fencing` says: a request for another (or no) registration of this
broker is STALE_BROKER_EPOCH; one from a deposed controller STALE_CONTROLLER_EPOCH; one whose
controller the quorum does not confirm NOT_CONTROLLER, logged once per source, with nothing
applied or stored; a partition state or StopReplica older than the applied leader epoch is
refused per partition.

The controller sends LeaderAndIsr before the UpdateMetadata of the same change, so a brand-new
topic's partitions can arrive before its configs (which choose the storage engine). Such
partition states wait in ``pending`` and are applied right after the UpdateMetadata that
introduces the topic; partitions already open apply at once.

Topic hooks: once the broker started (``pydmq_broker_startup``, which sees the topics known
then), each applied UpdateMetadata that adds a topic to the metadata cache fires
``pydmq_on_topic_created`` and each that removes one ``pydmq_on_topic_deleted``, after this
node's partitions of it were opened (LeaderAndIsr precedes it) or deleted (StopReplica
precedes it), as a single node fires them (docs/HOOKS.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from pydmq.broker.cluster.alter_partition import AlterPartitionManager
from pydmq.broker.cluster.controller_client import ControllerClient, ControllerUnavailableError
from pydmq.broker.cluster.fencing import (
    ControllerEpochVerifier,
    ControllerRequestFence,
    LeaderAndEpoch,
    leader_epoch_fenced,
)
from pydmq.broker.cluster.lifecycle import BrokerEndpoint, BrokerLifecycleManager
from pydmq.broker.cluster.metadata_cache import MetadataCache, MetadataUpdate
from pydmq.broker.cluster.producer_ids import ProducerIdBlockManager
from pydmq.broker.cluster.replica_fetcher import FetchState, ReplicaFetcherManager
from pydmq.broker.dynamic_configs import install_broker_configs
from pydmq.broker.services import FinalizedFeatures
from pydmq.config.topic import TopicConfig
from pydmq.protocol.control_requests import FULL
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from pydmq.protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from pydmq.protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from pydmq.replication.replica_manager import PartitionState, Transition
from pydmq.security.sasl.listener import node_sasl_client
from pydmq.security.tls import node_client_ssl
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["BrokerCluster", "LeadershipListener"]

log = logging.getLogger(__name__)

LEADER_AND_ISR_FULL = FULL
CONTROLLED_SHUTDOWN_API = 7
CONTROLLED_SHUTDOWN_VERSION = 3
_NO_LEADER = -1
_READY_REPORT_S = 30.0

# Called with (partition, is_leader) after a partition became leader or follower here.
LeadershipListener = Callable[[TopicPartition, bool], None]


@dataclass(slots=True)
class _Pending:
    topic_id: uuid.UUID
    state: LeaderAndIsrPartitionState


class BrokerCluster:
    """The broker role in cluster mode; built and started by :class:`Broker`."""

    def __init__(self, broker: Broker) -> None:
        config = broker.config
        self.broker = broker
        self.node_id = broker.node_id
        self.inter_broker_listener = config.inter_broker_listener_name
        # TLS of this broker's clients to the others when the inter-broker listener is SSL
        # (replica fetchers, transaction markers, partition verification).
        self.inter_broker_ssl = node_client_ssl(config, self.inter_broker_listener)
        self.metadata_cache = MetadataCache(self.node_id)
        self.controller_client = ControllerClient(
            config.controller_quorum_voters,
            client_id=f"broker-{self.node_id}",
            leader_hint=self._local_raft_leader,
            ssl_context=node_client_ssl(config, config.controller_listener_names[0]),
            sasl=node_sasl_client(
                config, config.controller_listener_names[0], "sasl.mechanism.controller.protocol"
            ),
        )
        rack = config.get("broker.rack")
        self.lifecycle = BrokerLifecycleManager(
            broker_id=self.node_id,
            cluster_id=broker.cluster_id,
            client=self.controller_client,
            endpoints=self.advertised_endpoints,
            rack=None if rack is None else str(rack),
            heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
            metadata_offset=lambda: self.metadata_cache.metadata_offset,
            log_dirs_offline=broker.replica_manager.check_log_dirs,
            on_fenced_changed=lambda fenced: self._maybe_ready(),
            on_features=self._features_learned,
        )
        broker.replica_manager.log_dir_failure_listeners.append(self._log_dir_failed)
        fetch_max = config.get_int("replica.fetch.max.bytes")
        self.fetchers = ReplicaFetcherManager(
            node_id=self.node_id,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
            partitions=broker.replica_manager.get,
            endpoint=lambda b: self.metadata_cache.endpoint(b, self.inter_broker_listener),
            max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
            fetch_max_bytes=fetch_max,
            response_max_bytes=max(fetch_max, 10 * 1024 * 1024),
            ssl_context=self.inter_broker_ssl,
            sasl=node_sasl_client(
                config, self.inter_broker_listener, "sasl.mechanism.inter.broker.protocol"
            ),
        )
        lag_ms = config.get_int("replica.lag.time.max.ms")
        self.alter_partition = AlterPartitionManager(
            broker_id=self.node_id,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
            client=self.controller_client,
            partitions=lambda: list(broker.replica_manager.partitions.values()),
            on_committed=broker.replica_manager.notify_high_watermark,
            interval_ms=max(100, min(lag_ms // 2, 2500)),
            is_eligible=self.metadata_cache.is_alive,
            stats=broker.replica_manager.topic_stats,
        )
        self.producer_ids = ProducerIdBlockManager(
            broker_id=self.node_id,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
            client=self.controller_client,
        )
        self.pending: dict[TopicPartition, _Pending] = {}
        # Set once, when this broker may serve clients (see wait_ready).
        self.ready = asyncio.Event()
        self.leadership_listeners: list[LeadershipListener] = []
        self.controller_epochs = ControllerEpochVerifier(
            local=self._local_raft_view, ask_voters=self.controller_client.quorum_views
        )
        self.fence = ControllerRequestFence(
            node_id=self.node_id,
            broker_epoch=lambda: self.lifecycle.broker_epoch,
            verifier=self.controller_epochs,
        )
        # False until pydmq_broker_startup: the topics known by then are the start-up state.
        self.topic_hooks_enabled = False

    # -- identity --------------------------------------------------------------------
    def _local_raft_leader(self) -> int | None:
        """The quorum leader as this node's own controller sees it (combined nodes only)."""
        controller = self.broker.controller
        leader = -1 if controller is None else controller.active_controller_id
        return None if leader < 0 else leader

    def _local_raft_view(self) -> LeaderAndEpoch | None:
        """This node's own Raft leader and epoch (combined nodes only): a trusted source."""
        controller = self.broker.controller
        if controller is None or controller.epoch < 0:
            return None
        return LeaderAndEpoch(controller.active_controller_id, controller.epoch)

    def advertised_endpoints(self) -> list[BrokerEndpoint]:
        """The broker listeners (never controller ones) as clients and peers reach them,
        and the control-plane listener, where the controllers reach this broker."""
        controller_names = set(self.broker.config.controller_listener_names)
        protocols = self.broker.config.listener_security_protocols()
        out: list[BrokerEndpoint] = []
        for listener in self.broker.listeners.advertised:
            if listener.name in controller_names:
                continue
            host, port = self.broker.advertised_endpoint(listener.name)
            out.append(
                BrokerEndpoint(listener.name, host, port, protocols.get(listener.name, "PLAINTEXT"))
            )
        return out

    @property
    def broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch

    @property
    def controller_epoch(self) -> int:
        return self.metadata_cache.controller_epoch

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self.lifecycle.start()
        self.alter_partition.start()

    async def wait_ready(self) -> None:
        """Until this broker may serve clients: registered, unfenced, and serving the
        controller's metadata (an UpdateMetadata at or after its registration applied, its
        FULL state first, that lists this broker alive). Kafka's broker likewise waits to be
        caught up and unfenced before it starts its data-plane acceptors. Without a quorum this
        waits for ever, saying so every ``_READY_REPORT_S`` seconds."""
        while True:
            try:
                await asyncio.wait_for(self.ready.wait(), _READY_REPORT_S)
                return
            except TimeoutError:
                log.warning(
                    "broker %d is not ready yet (%s); client listeners stay closed",
                    self.node_id,
                    self._not_ready_because(),
                )

    def _not_ready_because(self) -> str | None:
        """What readiness still waits for; None once ready."""
        epoch = self.lifecycle.broker_epoch
        if epoch < 0:
            return "not registered: no active controller has answered"
        if self.metadata_cache.metadata_offset < epoch:
            return f"registered with epoch {epoch}, no metadata from the controller yet"
        if self.lifecycle.fenced:
            return f"registered with epoch {epoch}, still fenced"
        if not self.metadata_cache.is_alive(self.node_id):
            return "unfenced, waiting for the metadata that lists this broker alive"
        return None

    def _features_learned(self, features: FinalizedFeatures) -> None:
        """The controller's finalized feature levels: the ones this broker reports to
        clients."""
        self.metadata_cache.finalized_features = features

    def _maybe_ready(self) -> None:
        if not self.ready.is_set() and self._not_ready_because() is None:
            self.ready.set()

    async def controlled_shutdown(self, timeout: float = 5.0) -> bool:
        """Ask the controller to move leadership away; True once it says none is left here.

        Bounded by ``timeout``, and given up at once when a majority of the voters refuse
        connections (:class:`QuorumLostError`: the last node of a stopping cluster has no
        controller to wait for), so a broker whose controller is gone still stops at once.
        """
        if self.lifecycle.broker_epoch < 0:
            return False
        self.lifecycle.begin_shutdown()
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            request = ControlledShutdownRequest(
                broker_id=self.node_id, broker_epoch=self.lifecycle.broker_epoch
            )
            try:
                response: ControlledShutdownResponse = await self.controller_client.send(
                    CONTROLLED_SHUTDOWN_API,
                    CONTROLLED_SHUTDOWN_VERSION,
                    request,
                    remaining,
                    require_quorum=True,
                )
            except ControllerUnavailableError as exc:
                log.info("broker %d: controlled shutdown not possible: %s", self.node_id, exc)
                return False
            if response.error_code == ErrorCode.NONE and not response.remaining_partitions:
                log.info("broker %d: controlled shutdown complete", self.node_id)
                return True
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        log.info("broker %d: controlled shutdown timed out", self.node_id)
        return False

    async def stop(self) -> None:
        await self.fetchers.shutdown()
        # First: a heartbeat or AlterPartition waiting for a controller that is gone fails
        # at once instead of at its timeout.
        await self.controller_client.close()
        await self.alter_partition.stop()
        await self.lifecycle.stop()
        await self.controller_epochs.close()

    def _log_dir_failed(self, log_dir: str) -> None:
        """A log dir went offline: ask to be fenced at once (the heartbeat says so) and stop
        replicating into it, as Kafka's handleLogDirFailure removes the fetchers of its
        partitions (each append would fail again, once per fetch). Until a restart this broker
        leads and follows nothing; the controller moves leadership away."""
        log.error("broker %d: log dir %s failed; replica fetchers stopped", self.node_id, log_dir)
        self.fetchers.remove_partitions(list(self.broker.replica_manager.partitions))
        self.lifecycle.heartbeat_now()

    # -- fencing ---------------------------------------------------------------------
    async def check_epochs(
        self,
        api: str,
        controller_id: int,
        controller_epoch: int,
        broker_epoch: int,
        source: str,
    ) -> int:
        """NONE, STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH or NOT_CONTROLLER for a
        controller request (:class:`~pydmq.broker.cluster.fencing.ControllerRequestFence`);
        only NONE stores the request's controller and epoch."""
        code = await self.fence.check(api, controller_id, controller_epoch, broker_epoch, source)
        if code == ErrorCode.NONE:
            self.metadata_cache.controller_id = controller_id
            self.metadata_cache.controller_epoch = controller_epoch
        return code

    # -- LeaderAndIsr ----------------------------------------------------------------
    async def leader_and_isr(
        self, request: LeaderAndIsrRequest, source: str
    ) -> LeaderAndIsrResponse:
        code = await self.check_epochs(
            "LeaderAndIsr",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            source,
        )
        if code != ErrorCode.NONE:
            return LeaderAndIsrResponse(error_code=code)
        for leader in request.live_leaders:
            self.fetchers.leader_endpoints[leader.broker_id] = (leader.host_name, leader.port)
        response = LeaderAndIsrResponse(error_code=ErrorCode.NONE)
        listed: set[TopicPartition] = set()
        for topic_state in request.topic_states:
            errors = LeaderAndIsrTopicError(topic_id=topic_state.topic_id)
            response.topics.append(errors)
            for ps in topic_state.partition_states:
                tp = TopicPartition(topic_state.topic_name, ps.partition_index)
                listed.add(tp)
                code = self._apply_or_defer(tp, topic_state.topic_id, ps)
                errors.partition_errors.append(
                    LeaderAndIsrPartitionError(partition_index=ps.partition_index, error_code=code)
                )
        if request.type_ == LEADER_AND_ISR_FULL:
            self._remove_stray(listed)
        return response

    def _apply_or_defer(
        self, tp: TopicPartition, topic_id: uuid.UUID, ps: LeaderAndIsrPartitionState
    ) -> int:
        if self.node_id not in ps.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        existing = self.broker.replica_manager.get(tp)
        topic = self.metadata_cache.topics.get(tp.topic)
        if existing is None and (topic is None or topic.topic_id != topic_id):
            self.pending[tp] = _Pending(topic_id, ps)
            return ErrorCode.NONE
        self.pending.pop(tp, None)
        config = TopicConfig(self.broker.config, {} if topic is None else dict(topic.configs))
        return self._apply(tp, topic_id, ps, config)

    def _apply(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        ps: LeaderAndIsrPartitionState,
        config: TopicConfig,
    ) -> int:
        replica_manager = self.broker.replica_manager
        existing = replica_manager.get(tp)
        if ps.leader_epoch < 0 or ps.partition_epoch < 0:
            return ErrorCode.STALE_CONTROLLER_EPOCH  # no epoch: never newer than a real one
        if existing is not None and existing.topic_id != topic_id:
            # The topic was deleted and re-created while we missed the StopReplica.
            self._stop(tp, delete=True)
        state = PartitionState(
            tp=tp,
            topic_id=topic_id,
            leader=ps.leader,
            leader_epoch=ps.leader_epoch,
            partition_epoch=ps.partition_epoch,
            replicas=list(ps.replicas),
            isr=list(ps.isr),
        )
        try:
            transition = replica_manager.apply_partition_state(state, config)
        except Exception:
            log.exception("applying LeaderAndIsr to %s failed", tp)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if transition is Transition.STALE:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if transition is Transition.LEADER:
            self.fetchers.remove_partitions([tp])
            log.info("%s: leader at epoch %d", tp, ps.leader_epoch)
            self._notify_leadership(tp, True)
        elif transition is Transition.FOLLOWER:
            self.fetchers.remove_partitions([tp])
            if ps.leader != _NO_LEADER and not replica_manager.offline_log_dirs:
                self.fetchers.add_partitions([FetchState(tp, topic_id, ps.leader, ps.leader_epoch)])
            log.info("%s: follower of %d at epoch %d", tp, ps.leader, ps.leader_epoch)
            self._notify_leadership(tp, False)
        else:
            # Same leader epoch, new ISR (e.g. a fenced follower removed): the high watermark
            # may have moved, so parked acks=-1 produces must re-check now, not at timeout.
            replica_manager.notify_high_watermark(tp)
        return ErrorCode.NONE

    def _notify_leadership(self, tp: TopicPartition, is_leader: bool) -> None:
        # Parked acks=-1 produces and long polls re-check (and fail as NOT_LEADER).
        self.broker.replica_manager.notify_high_watermark(tp)
        for listener in self.leadership_listeners:
            try:
                listener(tp, is_leader)
            except Exception:
                log.exception("leadership listener failed for %s", tp)

    def _remove_stray(self, listed: set[TopicPartition]) -> None:
        """After a FULL LeaderAndIsr: partitions hosted here that it does not list."""
        for tp in list(self.broker.replica_manager.partitions):
            if tp in listed:
                continue
            topic = self.metadata_cache.topics.get(tp.topic)
            partition = self.broker.replica_manager.get(tp)
            delete = topic is None or (
                partition is not None and partition.topic_id != topic.topic_id
            )
            log.info("%s: not assigned here any more (%s)", tp, "deleting" if delete else "closing")
            self._stop(tp, delete=delete)
        for tp in [tp for tp in self.pending if tp not in listed]:
            del self.pending[tp]

    # -- StopReplica -----------------------------------------------------------------
    async def stop_replica(self, request: StopReplicaRequest, source: str) -> StopReplicaResponse:
        code = await self.check_epochs(
            "StopReplica",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            source,
        )
        if code != ErrorCode.NONE:
            return StopReplicaResponse(error_code=code)
        response = StopReplicaResponse(error_code=ErrorCode.NONE)
        for topic_state in request.topic_states:
            for ps in topic_state.partition_states:
                tp = TopicPartition(topic_state.topic_name, ps.partition_index)
                partition = self.broker.replica_manager.get(tp)
                error = ErrorCode.NONE
                applied = -1 if partition is None else partition.leader_epoch
                if leader_epoch_fenced(ps.leader_epoch, applied):
                    error = ErrorCode.FENCED_LEADER_EPOCH
                else:
                    self.pending.pop(tp, None)
                    try:
                        self._stop(tp, delete=ps.delete_partition)
                    except Exception:
                        log.exception("stopping %s failed", tp)
                        error = ErrorCode.KAFKA_STORAGE_ERROR
                response.partition_errors.append(
                    StopReplicaPartitionError(
                        topic_name=tp.topic, partition_index=tp.partition, error_code=error
                    )
                )
        return response

    def _stop(self, tp: TopicPartition, *, delete: bool) -> None:
        self.fetchers.remove_partitions([tp])
        partition = self.broker.replica_manager.get(tp)
        was_leader = partition is not None and partition.is_leader
        self.broker.replica_manager.stop_replica(tp, delete=delete)
        if delete:
            self.broker.fetch_sessions.forget_topic(tp.topic)
        if was_leader:
            self._notify_leadership(tp, False)

    # -- UpdateMetadata --------------------------------------------------------------
    async def update_metadata(
        self, request: UpdateMetadataRequest, source: str
    ) -> UpdateMetadataResponse:
        code = await self.check_epochs(
            "UpdateMetadata",
            request.controller_id,
            request.controller_epoch,
            request.broker_epoch,
            source,
        )
        if code != ErrorCode.NONE:
            return UpdateMetadataResponse(error_code=code)
        result = self.metadata_cache.update(request)
        if not result.applied:
            return UpdateMetadataResponse(error_code=ErrorCode.NONE)
        replica_manager = self.broker.replica_manager
        if result.acls_changed and self.broker.authorizer is not None:
            self.broker.authorizer.update_acls(self.metadata_cache.acls)
        if result.client_quotas_changed:
            self.broker.quotas.update(self.metadata_cache.client_quotas)
        if result.broker_configs_changed:
            layers = self.metadata_cache.broker_configs
            install_broker_configs(self.broker, layers[""], layers[str(self.node_id)])
        for name in result.config_changed:
            topic = self.metadata_cache.topics.get(name)
            if topic is not None:
                replica_manager.update_config(name, TopicConfig(self.broker.config, topic.configs))
        for topic in result.deleted_topics:
            self.broker.fetch_sessions.forget_topic(topic.name)
        self._apply_pending()
        if self.topic_hooks_enabled:
            self._fire_topic_hooks(result)
        replica_manager.try_complete_delayed_delete_records()
        if self.lifecycle.fenced:
            self.lifecycle.heartbeat_now()
        self._maybe_ready()
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)

    def _fire_topic_hooks(self, result: MetadataUpdate) -> None:
        """The topic hooks of one applied UpdateMetadata: deletions first (a topic re-created
        under its name is deleted, then created). A failing hook is logged: the update is
        applied regardless."""
        plugins = self.broker.plugins
        calls: list[Callable[[], None]] = [
            partial(plugins.on_topic_deleted, t.name, str(t.topic_id))
            for t in result.deleted_topics
        ]
        calls += [
            partial(plugins.on_topic_created, t.name, str(t.topic_id), len(t.partitions))
            for t in result.created_topics
        ]
        for call in calls:
            try:
                call()
            except Exception:
                log.exception("broker %d: a topic hook failed", self.node_id)

    def _apply_pending(self) -> None:
        for tp, pending in list(self.pending.items()):
            topic = self.metadata_cache.topics.get(tp.topic)
            if topic is None:
                continue
            del self.pending[tp]
            if topic.topic_id != pending.topic_id:
                continue  # the topic this state was for is gone
            self._apply(
                tp, pending.topic_id, pending.state, TopicConfig(self.broker.config, topic.configs)
            )
