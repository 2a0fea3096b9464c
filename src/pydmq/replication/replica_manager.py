"""ReplicaManager: the partitions hosted here, their logs, appends and reads.

Opens logs through the storage engine chosen per topic (``pydmq.engine`` topic config, default
``log.engine``), wakes delayed fetches after appends, and runs log maintenance (retention,
segment roll by time, flushes, checkpoints). Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping

from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.replication.partition import Partition, append_policy
from pydmq.replication.purgatory import DelayedOperationPurgatory
from pydmq.storage.api import StorageEngine, StorageEngineSpec, TopicPartition
from pydmq.storage.log import LogAppendInfo, UnifiedLog

__all__ = ["ReplicaManager", "UnknownEngineError"]

log = logging.getLogger(__name__)


class UnknownEngineError(ValueError):
    """A topic names a storage engine no plugin registered."""


class ReplicaManager:
    """Hosts partitions; one instance per broker."""

    def __init__(
        self,
        config: BrokerConfig,
        engines: Mapping[str, StorageEngineSpec],
    ) -> None:
        self.config = config
        self._engine_specs = dict(engines)
        self._engines: dict[str, StorageEngine] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self.fetch_purgatory = DelayedOperationPurgatory()

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
        engine = self.engine(topic_config.get_str("pydmq.engine"))
        engine_log = engine.open_log(tp, topic_config.log_config())
        unified = UnifiedLog(engine_log, self.config.get_int("producer.id.expiration.ms"))
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
        )
        self.partitions[tp] = partition
        return partition

    def update_config(self, topic: str, topic_config: TopicConfig) -> None:
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.policy = append_policy(topic_config)
                partition.min_insync_replicas = topic_config.get_int("min.insync.replicas")

    def delete_partition(self, tp: TopicPartition, engine_name: str) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            partition.log.engine_log.close()
        self.engine(engine_name).delete_log(tp)
        self.fetch_purgatory.notify(tp)

    def append(self, partition: Partition, records: memoryview) -> LogAppendInfo:
        info = partition.append_records_to_leader(records)
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
            except Exception:
                log.exception("log maintenance failed for %s", partition.tp)
        return deleted

    def flush_all(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.flush()

    async def checkpoint_changed(self) -> int:
        """Checkpoint the partitions whose high watermark or producer state moved.

        Each file write fsyncs twice, so the loop yields after every partition that wrote:
        with hundreds of partitions, doing them all in one go froze request handling (and
        session timers) for seconds under disk contention.
        """
        written = 0
        for partition in list(self.partitions.values()):
            if partition.log.maybe_checkpoint():
                written += 1
                await asyncio.sleep(0)
        return written

    def shutdown(self) -> None:
        for partition in list(self.partitions.values()):
            try:
                partition.log.close()
            except Exception:
                log.exception("closing %s failed", partition.tp)
        self.partitions.clear()
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
