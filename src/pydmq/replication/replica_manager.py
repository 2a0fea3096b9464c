"""ReplicaManager: the partitions hosted here, their logs, appends and reads.

Opens logs through the storage engine chosen per topic (``pydmq.engine`` topic config, default
``log.engine``), wakes delayed fetches after appends, and runs log maintenance (retention,
segment roll by time, flushes, checkpoints). Owned by the event loop.

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
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.replication.partition import Partition, append_policy
from pydmq.replication.purgatory import DelayedOperationPurgatory
from pydmq.replication.strategy import ISR_STRATEGY, ReplicationStrategy, ReplicationStrategySpec
from pydmq.storage.api import LogConfig, StorageEngine, StorageEngineSpec, TopicPartition
from pydmq.storage.checkpoint_writer import CheckpointWriter
from pydmq.storage.errors import KafkaStorageError
from pydmq.storage.log import LogAppendInfo, LogStorageError, UnifiedLog

__all__ = ["PartitionState", "ReplicaManager", "Transition", "UnknownEngineError"]

log = logging.getLogger(__name__)


class UnknownEngineError(ValueError):
    """A topic names a storage engine no plugin registered."""


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
        self.offline_log_dirs: dict[str, str] = {}  # log dir -> what took it offline
        self.log_dir_failure_listeners: list[Callable[[str], None]] = []

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
            engine = spec.factory(str(data_dir), {})
            self._engines[name] = engine
        return engine

    def engine_names(self) -> list[str]:
        return sorted(self._engine_specs)

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

    def _open_log(
        self, tp: TopicPartition, topic_config: TopicConfig, *, replicated: bool = False
    ) -> UnifiedLog:
        """Open ``tp``'s log; ``replicated``: a follower whose leader holds the data, so damage
        the engine finds at open may be truncated away (``LogConfig.replicated``)."""
        engine_name = topic_config.get_str("pydmq.engine")
        log_config = topic_config.log_config()
        if replicated:
            log_config = dataclasses.replace(log_config, replicated=True)
        engine_log = self.engine(engine_name).open_log(tp, log_config)
        self._engine_of[tp] = engine_name
        return UnifiedLog(engine_log, self.config.get_int("producer.id.expiration.ms"))

    # -- partitions ------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

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
        unified = self._open_log(tp, topic_config)
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
            policy=append_policy(topic_config),
            min_insync_replicas=topic_config.get_int("min.insync.replicas"),
            strategy=self.strategy(topic_config.get_str("pydmq.replication.strategy")),
        )
        self.partitions[tp] = partition
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
        partition = Partition(
            tp=tp,
            topic_id=topic_id,
            log=self._open_log(tp, topic_config, replicated=replicated),
            leader_id=-1,
            leader_epoch=-1,
            replicas=[],
            isr=[],
            policy=append_policy(topic_config),
            min_insync_replicas=topic_config.get_int("min.insync.replicas"),
            strategy=self.strategy(topic_config.get_str("pydmq.replication.strategy")),
            replica_lag_time_max_ms=self.config.get_int("replica.lag.time.max.ms"),
            partition_epoch=-1,
            local_broker_id=self.config.node_id,
        )
        self.partitions[tp] = partition
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
                    partition.log.engine_log.close()
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

    def update_config(self, topic: str, topic_config: TopicConfig) -> None:
        """Apply a topic's new configs to its hosted partitions: append policy, min ISR and
        the engine log's retention/segment/flush settings."""
        log_config: LogConfig | None = None
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.policy = append_policy(topic_config)
                partition.min_insync_replicas = topic_config.get_int("min.insync.replicas")
                engine_log = partition.log.engine_log
                # Both built-in engines read their LogConfig from ``config`` on every decision.
                if isinstance(getattr(engine_log, "config", None), LogConfig):
                    if log_config is None:
                        log_config = topic_config.log_config()
                    engine_log.config = log_config  # type: ignore[attr-defined]

    def delete_partition(self, tp: TopicPartition, engine_name: str) -> None:
        partition = self.partitions.pop(tp, None)
        self._engine_of.pop(tp, None)
        if partition is not None:
            partition.log.engine_log.close()
        self.engine(engine_name).delete_log(tp)
        self.notify_high_watermark(tp)

    def append(
        self, partition: Partition, records: memoryview, required_acks: int = 1
    ) -> LogAppendInfo:
        """Append a produced record set as leader; raises LogAppendError (incl. not leader,
        not enough replicas for ``required_acks=-1``)."""
        try:
            info = partition.append_records_to_leader(records, required_acks)
        except LogStorageError as exc:
            if exc.offline:
                self.log_dir_failed(exc.log_dir, exc.message)
            raise
        if not info.duplicate:
            self.fetch_purgatory.notify(partition.tp)
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

    def flush_all(self) -> None:
        """Flush every partition; a storage failure of one does not stop the others (the
        first is raised at the end)."""
        failed: KafkaStorageError | None = None
        for partition in list(self.partitions.values()):
            try:
                partition.log.flush()
            except KafkaStorageError as exc:
                failed = failed or exc
        self.check_log_dirs()
        if failed is not None:
            raise failed

    async def checkpoint_changed(self, producer_snapshots: bool = True) -> int:
        """Checkpoint the partitions whose high watermark (and, with ``producer_snapshots``,
        producer state) moved.

        What to write is captured here; the writes (each fsyncs twice) run on the checkpoint
        writer's thread, and this waits for them before the next pass. On the event loop, one
        fsync under a heavy write load stalled request handling for hundreds of ms. Logs of
        engines without thread-safe checkpoint writes write here, yielding after each.
        """
        if self._checkpoint_writer is None:
            self._checkpoint_writer = CheckpointWriter()
        writer = self._checkpoint_writer
        written = 0
        for partition in list(self.partitions.values()):
            if partition.log.maybe_checkpoint(writer, producer_snapshot=producer_snapshots):
                written += 1
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
