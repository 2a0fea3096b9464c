"""ReplicaManager: the partitions hosted here, their logs, appends and reads.

Opens logs through the storage engine chosen per topic (``pydmq.engine`` topic config, default
``log.engine``), and runs log maintenance (retention, segment roll by time, flushes,
checkpoints). Owned by the event loop.

Requests reach the partitions through it, as Kafka's: :meth:`ReplicaManager.append_records`
(leader checks, appends, the delayed produce of ``acks=-1``: :mod:`pydmq.replication.append`),
:meth:`ReplicaManager.fetch_messages` (follower identity and fetch state, high watermark
moves, reads and the long poll: :mod:`pydmq.replication.fetch`),
:meth:`ReplicaManager.delete_records_on_leader` with
:meth:`ReplicaManager.delayed_delete_records`, and :meth:`ReplicaManager.leader_partition`
(the leader checks of the other partition APIs). Parameters and results are neutral
dataclasses; the handlers map them from and to the wire. In cluster mode the broker attaches
the cluster metadata at start-up (:meth:`ReplicaManager.attach_cluster`): which partitions the
cluster knows, the brokers' registration epochs and liveness, and where to ask for an ISR
expansion.

Single-node mode opens every partition as its leader (:meth:`ReplicaManager.make_leader`).
Cluster mode opens a partition only when the controller's LeaderAndIsr names this broker a
replica (:meth:`ReplicaManager.apply_partition_state`), and closes or deletes it on
StopReplica (:meth:`ReplicaManager.stop_replica`). Three purgatories wait on partitions:
long-polling fetches (woken by appends, high watermark and log start moves), ``acks=-1``
produces (woken by high watermark moves, ISR and leadership changes:
:meth:`ReplicaManager.notify_high_watermark`) and DeleteRecords waiting for the followers'
log start offsets (woken by follower fetches, ISR and leadership changes, and changes of the
alive brokers).

Storage failures: an append the storage failed answers KAFKA_STORAGE_ERROR (the partition's
state is as before it). When a failure takes a log dir offline (an I/O error, a failed
fsync: see :mod:`pydmq.storage.errors`) the dir is listed in :attr:`offline_log_dirs` and the
:attr:`log_dir_failure_listeners` are told (cluster mode: the broker asks the controller to
fence it, so leadership moves to the other ISR members). Failures the maintenance passes meet
(checkpoints, flushes, rolls) are found by asking each engine for its ``offline`` failure.
Partitions live as long as the broker, and each holds ~20 objects the cyclic garbage
collector tracks: with tens of thousands hosted, every full collection walked them all and
held the event loop 0.1-0.5 s (measured while creating 10,000 partitions on a node hosting
20,000). Every :data:`SETTLE_EVERY` partitions opened, :meth:`ReplicaManager.settle` collects
what is not frozen yet (only the objects since the last settle: a few ms) and freezes what is
alive (``gc.freeze``), so later collections skip the partitions. Deleting a partition leaves
no reference cycle (checked), so frozen partitions are still freed by reference counting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import gc
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.append import AppendResult, ProduceEntry, append_records
from pydmq.replication.delayed_delete_records import (
    DeleteRecordsResult,
    PendingDelete,
    await_deletes,
)
from pydmq.replication.fetch import FetchParams, FetchPartitionResult, FetchTarget, fetch_messages
from pydmq.replication.partition import Partition, append_policy
from pydmq.replication.purgatory import DelayedOperationPurgatory
from pydmq.replication.stats import BrokerTopicStats
from pydmq.replication.strategy import ISR_STRATEGY, ReplicationStrategy, ReplicationStrategySpec
from pydmq.replication.txn_markers import TxnMarkerEntry, append_txn_markers
from pydmq.replication.txn_verification import TransactionVerifier
from pydmq.storage.api import (
    LogConfig,
    OffsetOutOfRangeError,
    StorageEngine,
    StorageEngineSpec,
    TopicPartition,
)
from pydmq.storage.checkpoint_writer import CheckpointWriter
from pydmq.storage.errors import KafkaStorageError
from pydmq.storage.log import (
    AppendOrigin,
    AppendPolicy,
    LogAppendInfo,
    LogStorageError,
    UnifiedLog,
)

__all__ = [
    "HIGH_WATERMARK",
    "SETTLE_EVERY",
    "ClusterMetadata",
    "PartitionState",
    "ReplicaManager",
    "Transition",
    "UnknownEngineError",
]

log = logging.getLogger(__name__)

SETTLE_EVERY = 250
"""Partitions opened between two :meth:`ReplicaManager.settle` calls."""

_PASS_SLICE = 1000
"""Partitions a checkpoint pass looks at between two yields to the event loop."""


HIGH_WATERMARK = -1
"""The offset a DeleteRecords names to delete up to the high watermark."""


class UnknownEngineError(ValueError):
    """A topic names a storage engine no plugin registered."""


class ClusterMetadata(Protocol):
    """What the replica manager asks of the cluster metadata (cluster mode; the broker's
    metadata cache)."""

    def partition(self, tp: TopicPartition, /) -> object | None:
        """The cluster's record of ``tp`` (None: the cluster does not know it)."""
        ...

    def broker_epoch(self, broker_id: int, /) -> int:
        """The registration epoch of an alive broker; -1 when it is not alive (or unknown)."""
        ...

    def is_alive(self, broker_id: int, /) -> bool:
        """Whether ``broker_id`` is registered and not fenced."""
        ...


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition's state from a LeaderAndIsr request, decoupled from the wire class."""

    tp: TopicPartition
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True, slots=True)
class _OpenSettings:
    """What opening a partition reads from its topic's configs, resolved once per topic."""

    engine: str
    log_config: LogConfig
    policy: AppendPolicy
    min_insync_replicas: int
    strategy: ReplicationStrategy


class Transition(enum.Enum):
    """What applying a :class:`PartitionState` did to the local replica."""

    LEADER = "leader"  # leads now (new leadership or new leader epoch)
    FOLLOWER = "follower"  # follows a new leader epoch: fetch again after truncation
    UNCHANGED = "unchanged"  # same epochs (replicas/ISR refreshed)
    STALE = "stale"  # older than what is applied: ignored


class ReplicaManager:
    """Hosts partitions; one instance per broker."""

    def __init__(
        self,
        config: BrokerConfig,
        engines: Mapping[str, StorageEngineSpec],
        strategies: Mapping[str, ReplicationStrategySpec] | None = None,
    ) -> None:
        self.config = config
        self._engine_specs = dict(engines)
        self._engines: dict[str, StorageEngine] = {}
        self._strategy_specs = dict(strategies or {})
        self._strategies: dict[str, ReplicationStrategy] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self._engine_of: dict[TopicPartition, str] = {}
        self.fetch_purgatory = DelayedOperationPurgatory()
        self._checkpoint_writer: CheckpointWriter | None = None
        self.produce_purgatory = DelayedOperationPurgatory()
        self.delete_records_purgatory = DelayedOperationPurgatory()
        # The settings of the TopicConfig object opened last: callers open every partition of
        # a topic with one object, and resolving it cost ~25 us per partition.
        self._settings_of: tuple[TopicConfig, _OpenSettings] | None = None
        self._unsettled = 0  # partitions opened since the last settle()
        self.offline_log_dirs: dict[str, str] = {}  # log dir -> what took it offline
        self.log_dir_failure_listeners: list[Callable[[str], None]] = []
        # Cluster mode (attach_cluster at start-up): the cluster metadata, and where to ask
        # for an ISR expansion when a follower outside the ISR caught up.
        self.cluster: ClusterMetadata | None = None
        self._isr_expansion_wanted: Callable[[], None] | None = None
        # Who verifies a transaction's first batch per partition with its coordinator
        # (KIP-890 part 1); set by the broker at start-up, None: not verified.
        self.txn_verifier: TransactionVerifier | None = None
        # Per-topic bytes and messages in and out, ISR changes (read by /metrics).
        self.topic_stats = BrokerTopicStats()

    def attach_cluster(
        self, metadata: ClusterMetadata, isr_expansion_wanted: Callable[[], None]
    ) -> None:
        """Cluster mode, at start-up: the cluster metadata this broker follows, and the call
        that wakes the ISR change proposer."""
        self.cluster = metadata
        self._isr_expansion_wanted = isr_expansion_wanted

    # -- storage failures ------------------------------------------------------------
    def log_dir_failed(self, log_dir: str, reason: str) -> None:
        """Record that ``log_dir`` went offline and tell the listeners (once per dir)."""
        if log_dir in self.offline_log_dirs:
            return
        self.offline_log_dirs[log_dir] = reason
        log.error("log dir %s is offline: %s", log_dir, reason)
        for listener in list(self.log_dir_failure_listeners):
            try:
                listener(log_dir)
            except Exception:
                log.exception("log dir failure listener failed")

    def check_log_dirs(self) -> bool:
        """Ask every engine whether a failure took its data dir offline (an engine may expose
        the failure as ``offline``); returns whether any log dir is offline."""
        for engine in list(self._engines.values()):
            failure = getattr(engine, "offline", None)
            if isinstance(failure, KafkaStorageError):
                self.log_dir_failed(failure.log_dir, failure.message)
        return bool(self.offline_log_dirs)

    # -- engines ---------------------------------------------------------------------
    def engine(self, name: str) -> StorageEngine:
        engine = self._engines.get(name)
        if engine is None:
            spec = self._engine_specs.get(name)
            if spec is None:
                known = ", ".join(sorted(self._engine_specs)) or "none"
                raise UnknownEngineError(f"unknown storage engine {name!r} (registered: {known})")
            data_dir = (
                self.config.log_dir if name == "segment" else self.config.log_dir / f"engine-{name}"
            )
            data_dir.mkdir(parents=True, exist_ok=True)
            # Every engine may hold this share of the descriptor limit (the segment engine's
            # LRU of open segment files); engines without open files ignore it.
            share = self.config.get("pydmq.log.open.files.share")
            engine = spec.factory(str(data_dir), {"open.files.share": str(share)})
            self._engines[name] = engine
        return engine

    def strategy(self, name: str) -> ReplicationStrategy:
        """The replication strategy registered as ``name`` (``isr`` when none is)."""
        strategy = self._strategies.get(name)
        if strategy is None:
            spec = self._strategy_specs.get(name)
            if spec is None:
                if name != "isr":
                    log.warning("unknown replication strategy %r: using isr", name)
                strategy = ISR_STRATEGY
            else:
                strategy = spec.factory()
            self._strategies[name] = strategy
        return strategy

    def _settings(self, topic_config: TopicConfig) -> _OpenSettings:
        last = self._settings_of
        if last is not None and last[0] is topic_config:
            return last[1]
        settings = _OpenSettings(
            engine=topic_config.get_str("pydmq.engine"),
            log_config=topic_config.log_config(),
            policy=append_policy(topic_config),
            min_insync_replicas=topic_config.get_int("min.insync.replicas"),
            strategy=self.strategy(topic_config.get_str("pydmq.replication.strategy")),
        )
        self._settings_of = (topic_config, settings)
        return settings

    def _open_log(
        self, tp: TopicPartition, settings: _OpenSettings, *, replicated: bool = False
    ) -> UnifiedLog:
        """Open ``tp``'s log; ``replicated``: a follower whose leader holds the data, so damage
        the engine finds at open may be truncated away (``LogConfig.replicated``)."""
        log_config = settings.log_config
        if replicated:
            log_config = dataclasses.replace(log_config, replicated=True)
        engine_log = self.engine(settings.engine).open_log(tp, log_config)
        self._engine_of[tp] = settings.engine
        return UnifiedLog(engine_log, self.config.get_int("producer.id.expiration.ms"))

    # -- partitions ------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def logs(self) -> list[tuple[TopicPartition, UnifiedLog]]:
        """Every hosted partition's log (the log cleaner enumerates them on the event loop)."""
        return [(tp, partition.log) for tp, partition in self.partitions.items()]

    def settle(self) -> None:
        """Keep the partitions opened so far out of the cyclic garbage collector's walks:
        collect the objects allocated since the last settle, then freeze what is alive."""
        self._unsettled = 0
        gc.collect()
        gc.freeze()

    def _add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = partition
        self._unsettled += 1
        if self._unsettled >= SETTLE_EVERY:
            self.settle()

    def make_leader(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        topic_config: TopicConfig,
        leader_epoch: int,
        replicas: list[int],
        isr: list[int],
    ) -> Partition:
        """Open (or create) the log of ``tp`` and lead it."""
        existing = self.partitions.get(tp)
        if existing is not None:
            existing.leader_epoch = leader_epoch
            existing.log.maybe_assign_epoch_start_offset(leader_epoch, existing.log.log_end_offset)
            return existing
        settings = self._settings(topic_config)
        unified = self._open_log(tp, settings)
        unified.update_high_watermark(unified.log_end_offset)
        unified.maybe_assign_epoch_start_offset(leader_epoch, unified.log_end_offset)
        partition = Partition(
            tp=tp,
            topic_id=topic_id,
            log=unified,
            leader_id=self.config.node_id,
            leader_epoch=leader_epoch,
            replicas=replicas,
            isr=isr,
            policy=settings.policy,
            min_insync_replicas=settings.min_insync_replicas,
            strategy=settings.strategy,
        )
        self._add(partition)
        return partition

    # -- cluster mode: LeaderAndIsr / StopReplica -----------------------------------------
    def open_partition(
        self,
        tp: TopicPartition,
        topic_id: uuid.UUID,
        topic_config: TopicConfig,
        *,
        replicated: bool = False,
    ) -> Partition:
        """Open ``tp``'s log as a replica with no leadership yet (cluster mode); ``replicated``
        as for :meth:`_open_log`."""
        existing = self.partitions.get(tp)
        if existing is not None:
            return existing
        settings = self._settings(topic_config)
        partition = Partition(
            tp=tp,
            topic_id=topic_id,
            log=self._open_log(tp, settings, replicated=replicated),
            leader_id=-1,
            leader_epoch=-1,
            replicas=[],
            isr=[],
            policy=settings.policy,
            min_insync_replicas=settings.min_insync_replicas,
            strategy=settings.strategy,
            replica_lag_time_max_ms=self.config.get_int("replica.lag.time.max.ms"),
            partition_epoch=-1,
            local_broker_id=self.config.node_id,
        )
        self._add(partition)
        return partition

    def apply_partition_state(self, state: PartitionState, topic_config: TopicConfig) -> Transition:
        """Apply one LeaderAndIsr partition state: open the log if needed, then lead or follow.

        Epochs older than the applied ones are STALE (Kafka answers STALE_CONTROLLER_EPOCH for
        the partition); equal ones refresh replicas and ISR only.
        """
        partition = self.partitions.get(state.tp)
        if partition is not None and (
            state.leader_epoch < partition.leader_epoch
            or state.partition_epoch < partition.partition_epoch
        ):
            return Transition.STALE
        if partition is None:
            # A follower of another leader may repair damage at open by truncating before it
            # (the leader has the data); a leader, or the only replica, must not.
            follower = state.leader != self.config.node_id and len(state.replicas) > 1
            partition = self.open_partition(
                state.tp, state.topic_id, topic_config, replicated=follower
            )
        now_ms = int(time.time() * 1000)
        if state.leader == self.config.node_id:
            was = (partition.is_leader, partition.leader_epoch)
            partition.make_leader(
                state.leader_epoch, state.partition_epoch, state.replicas, state.isr, now_ms
            )
            if was == (True, state.leader_epoch):
                return Transition.UNCHANGED
            return Transition.LEADER
        new_epoch = partition.make_follower(
            state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr
        )
        return Transition.FOLLOWER if new_epoch else Transition.UNCHANGED

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        """Close ``tp`` (StopReplica); with ``delete`` its log is removed too."""
        partition = self.partitions.pop(tp, None)
        engine_name = self._engine_of.pop(tp, None)
        if partition is not None:
            try:
                if delete:
                    partition.log.close_for_deletion()
                else:
                    partition.log.close()
            except Exception:
                log.exception("closing %s failed", tp)
        if delete and engine_name is not None:
            self.engine(engine_name).delete_log(tp)
        self.notify_high_watermark(tp)

    def notify_high_watermark(self, tp: TopicPartition) -> None:
        """Wake what waits on ``tp``'s high watermark, ISR or leadership: parked acks=-1
        produces, long-polling fetches (consumers read up to the high watermark) and
        DeleteRecords waiting for the low watermark."""
        self.produce_purgatory.notify(tp)
        self.fetch_purgatory.notify(tp)
        self.delete_records_purgatory.notify(tp)

    def try_complete_delayed_delete_records(self) -> None:
        """Every parked DeleteRecords checks its low watermark again (Kafka's
        tryCompleteDelayedDeleteRecords): the alive brokers, whose followers it counts, may
        have changed (an applied UpdateMetadata)."""
        self.delete_records_purgatory.notify_all()

    def wake_waiters(self) -> None:
        """Wake every parked request (long polls, acks=-1 produces, DeleteRecords) to re-check
        now: the broker is stopping."""
        self.fetch_purgatory.notify_all()
        self.produce_purgatory.notify_all()
        self.delete_records_purgatory.notify_all()

    def update_config(self, topic: str, topic_config: TopicConfig) -> None:
        """Apply a topic's new configs to its hosted partitions: append policy, min ISR and
        the engine log's retention/segment/flush settings."""
        self.update_configs({topic: topic_config})

    def update_configs(self, topic_configs: Mapping[str, TopicConfig]) -> None:
        """:meth:`update_config` of several topics in one pass over the hosted partitions
        (a changed broker default re-derives every topic's configs)."""
        log_configs: dict[str, LogConfig] = {}
        for tp, partition in self.partitions.items():
            topic_config = topic_configs.get(tp.topic)
            if topic_config is None:
                continue
            partition.policy = append_policy(topic_config)
            partition.min_insync_replicas = topic_config.get_int("min.insync.replicas")
            engine_log = partition.log.engine_log
            # Both built-in engines read their LogConfig from ``config`` on every decision.
            if isinstance(getattr(engine_log, "config", None), LogConfig):
                log_config = log_configs.get(tp.topic)
                if log_config is None:
                    log_config = log_configs[tp.topic] = topic_config.log_config()
                engine_log.config = log_config  # type: ignore[attr-defined]

    def delete_partition(self, tp: TopicPartition, engine_name: str) -> None:
        partition = self.partitions.pop(tp, None)
        self._engine_of.pop(tp, None)
        if partition is not None:
            partition.log.close_for_deletion()
        self.engine(engine_name).delete_log(tp)
        self.notify_high_watermark(tp)

    # -- requests: leader checks, appends, reads, deletions ------------------------------
    def unknown_partition_error(self, tp: TopicPartition) -> int:
        """The error for ``tp`` not hosted here: NOT_LEADER_OR_FOLLOWER when the cluster knows
        it (clients refresh metadata), else UNKNOWN_TOPIC_OR_PARTITION."""
        cluster = self.cluster
        if cluster is not None and cluster.partition(tp) is not None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def leader_partition(
        self, tp: TopicPartition, current_leader_epoch: int = -1
    ) -> tuple[Partition | None, int]:
        """The partition if this broker may serve ``tp`` as leader, else None and an error.

        Kafka's order (``Partition.localLogWithEpochOrThrow``): an unknown partition first
        (:meth:`unknown_partition_error`), then the client's ``current_leader_epoch`` (older
        than ours: FENCED_LEADER_EPOCH; newer, an epoch we have not heard of:
        UNKNOWN_LEADER_EPOCH; -1: not checked), then leadership (NOT_LEADER_OR_FOLLOWER). In
        single-node mode every hosted partition is led here.
        """
        partition = self.partitions.get(tp)
        if partition is None:
            return None, self.unknown_partition_error(tp)
        if current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch:
            return None, (
                ErrorCode.FENCED_LEADER_EPOCH
                if current_leader_epoch < partition.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
        if not partition.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition, ErrorCode.NONE

    def is_known_follower(self, replica_id: int, replica_epoch: int, inter_broker: bool) -> bool:
        """Whether a fetch claiming to come from broker ``replica_id`` is believed: it came
        over the inter-broker listener at a version carrying ``replica_epoch`` (the caller's
        part), this is a cluster-mode broker, ``replica_id`` is another broker and
        ``replica_epoch`` is that broker's registration epoch."""
        cluster = self.cluster
        if cluster is None or not inter_broker:
            return False
        return (
            replica_id != self.config.node_id
            and replica_epoch >= 0
            and replica_epoch == cluster.broker_epoch(replica_id)
        )

    def isr_expansion_wanted(self) -> None:
        """A follower outside the ISR caught up: wake the ISR change proposer (cluster mode)."""
        if self._isr_expansion_wanted is not None:
            self._isr_expansion_wanted()

    def append_records(
        self,
        entries: list[ProduceEntry],
        acks: int,
        timeout_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        transactional_id: str | None = None,
        add_partition: bool = False,
    ) -> list[AppendResult] | Awaitable[list[AppendResult]]:
        """Append produced record sets as leader (Kafka's appendRecords), of ``origin`` and,
        for a transactional produce, ``transactional_id`` (``add_partition``: of transactions
        v2, whose partitions the coordinator adds): one result per entry, now or once
        verified and, for ``acks=-1``, settled (see :mod:`pydmq.replication.append`)."""
        return append_records(
            self, entries, acks, timeout_ms, origin, transactional_id, add_partition
        )

    def append_txn_markers(
        self, entries: list[TxnMarkerEntry], timeout_ms: int
    ) -> Awaitable[None] | None:
        """Append transaction markers as leader (WriteTxnMarkers), filling each entry's
        error code now or once its ``acks=-1`` wait settled (see
        :mod:`pydmq.replication.txn_markers`)."""
        return append_txn_markers(self, entries, timeout_ms)

    def fetch_messages(
        self, params: FetchParams, targets: list[FetchTarget]
    ) -> list[FetchPartitionResult] | Awaitable[list[FetchPartitionResult]]:
        """Read partitions led here (Kafka's fetchMessages): one result per target, now or
        after the long poll (see :mod:`pydmq.replication.fetch`)."""
        return fetch_messages(self, params, targets)

    def delete_records_on_leader(
        self, partition: Partition, offset: int
    ) -> tuple[DeleteRecordsResult, PendingDelete | None]:
        """Raise the log start offset of ``partition`` (led here) to ``offset`` (or the high
        watermark for :data:`HIGH_WATERMARK`): the partition's answer, and what settles it
        later when it must wait.

        OFFSET_OUT_OF_RANGE (low watermark -1) for an offset above the high watermark or
        negative; an offset below the log start changes nothing and is no error. A moved log
        start wakes parked fetches, so parked follower fetches bring it to the followers. The
        answer carries the low watermark (:meth:`Partition.low_watermark`, counting the
        followers on alive brokers); while it is below the offset, the answer waits: the
        returned :class:`PendingDelete`, for :meth:`delayed_delete_records`.
        """
        log = partition.log
        high_watermark = log.high_watermark
        target = high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > high_watermark:
            return DeleteRecordsResult(ErrorCode.OFFSET_OUT_OF_RANGE), None
        try:
            changed = log.maybe_increment_log_start_offset(target)
        except OffsetOutOfRangeError:
            return DeleteRecordsResult(ErrorCode.OFFSET_OUT_OF_RANGE), None
        if changed:
            self.fetch_purgatory.notify(partition.tp)
        low_watermark = partition.low_watermark(self._is_alive())
        result = DeleteRecordsResult(ErrorCode.NONE, low_watermark)
        if low_watermark >= target:
            return result, None
        return result, PendingDelete(partition, target, low_watermark, result)

    def delayed_delete_records(
        self, pending: Sequence[PendingDelete], timeout_ms: int
    ) -> Awaitable[None]:
        """Wait until the low watermark of every pending deletion reached its offset, or
        ``timeout_ms`` (see :mod:`pydmq.replication.delayed_delete_records`)."""
        return await_deletes(
            self.delete_records_purgatory, pending, timeout_ms, self.get, self._is_alive()
        )

    def _is_alive(self) -> Callable[[int], bool] | None:
        cluster = self.cluster
        return cluster.is_alive if cluster is not None else None

    def append(
        self,
        partition: Partition,
        records: memoryview,
        required_acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append a produced record set (of ``origin``) as leader; raises LogAppendError
        (incl. not leader, not enough replicas for ``required_acks=-1``)."""
        try:
            info = partition.append_records_to_leader(records, required_acks, origin)
        except LogStorageError as exc:
            if exc.offline:
                self.log_dir_failed(exc.log_dir, exc.message)
            raise
        if not info.duplicate:
            self.fetch_purgatory.notify(partition.tp)
            self.topic_stats.record_append(
                partition.tp.topic, info.last_offset - info.first_offset + 1, len(records)
            )
        return info

    # -- maintenance -----------------------------------------------------------------
    def cleanup_logs(self) -> int:
        now_ms = int(time.time() * 1000)
        deleted = 0
        for partition in list(self.partitions.values()):
            try:
                partition.log.engine_log.maybe_roll(now_ms)
                deleted += partition.log.delete_old_segments(now_ms)
            except KafkaStorageError as exc:
                log.warning("log maintenance of %s failed: %s", partition.tp, exc.message)
            except Exception:
                log.exception("log maintenance failed for %s", partition.tp)
        self.check_log_dirs()
        return deleted

    async def checkpoint_changed(self, producer_snapshots: bool = True) -> int:
        """Checkpoint the partitions whose high watermark (and, with ``producer_snapshots``,
        producer state) moved.

        What to write is captured here; the writes (each fsyncs twice) run on the checkpoint
        writer's thread, and this waits for them before the next pass. On the event loop, one
        fsync under a heavy write load stalled request handling for hundreds of ms. Logs of
        engines without thread-safe checkpoint writes write here, yielding after each. The
        pass also yields every ``_PASS_SLICE`` partitions looked at: an idle pass over 100,000
        partitions took ~200 ms, in one piece, every 5 s.
        """
        if self._checkpoint_writer is None:
            self._checkpoint_writer = CheckpointWriter()
        writer = self._checkpoint_writer
        written = 0
        for looked, partition in enumerate(list(self.partitions.values()), 1):
            if partition.log.maybe_checkpoint(writer, producer_snapshot=producer_snapshots):
                written += 1
                await asyncio.sleep(0)
            elif looked % _PASS_SLICE == 0:
                await asyncio.sleep(0)
        await writer.drain()
        self.check_log_dirs()
        return written

    def shutdown(self) -> None:
        if self._checkpoint_writer is not None:
            self._checkpoint_writer.stop()  # queued writes first; close() writes the last ones
            self._checkpoint_writer = None
        for partition in list(self.partitions.values()):
            try:
                partition.log.close()
            except Exception:
                log.exception("closing %s failed", partition.tp)
        self.partitions.clear()
        self._engine_of.clear()
        self.produce_purgatory.notify_all()
        self.delete_records_purgatory.notify_all()
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
