"""Builders shared by the replication unit tests: logs on the memory engine, batches, partitions."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping

from pydmq.config.broker import BrokerConfig
from pydmq.engines.memory import MemoryLog
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.replication.partition import Partition
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.replication.strategy import ISR_STRATEGY, ReplicationStrategy
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, UnifiedLog

TP = TopicPartition("t", 0)
POLICY = AppendPolicy(
    max_message_bytes=1 << 20,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)


def new_log() -> UnifiedLog:
    return UnifiedLog(MemoryLog(LogConfig()))


def batch(
    count: int = 1,
    *,
    base_offset: int = 0,
    epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> memoryview:
    records = [SimpleRecord(None, b"v%d" % i, (), 1000) for i in range(count)]
    data = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    return memoryview(bytearray(data))


def partition(
    local: int = 1,
    *,
    strategy: ReplicationStrategy = ISR_STRATEGY,
    min_isr: int = 1,
    lag_ms: int = 1000,
    log: UnifiedLog | None = None,
) -> Partition:
    """A cluster-mode partition that has not received any LeaderAndIsr yet."""
    return Partition(
        tp=TP,
        topic_id=uuid.UUID(int=1),
        log=log or new_log(),
        leader_id=-1,
        leader_epoch=-1,
        replicas=[],
        isr=[],
        policy=POLICY,
        min_insync_replicas=min_isr,
        strategy=strategy,
        replica_lag_time_max_ms=lag_ms,
        partition_epoch=-1,
        local_broker_id=local,
    )


class Verifier:
    """Answers every partition ``code``: now, or when :meth:`answer` is called (``later``)."""

    def __init__(self, code: int = ErrorCode.NONE, *, later: bool = False) -> None:
        self.code = code
        self.later = later
        self.enabled = True
        self.calls: list[tuple[str, int, int, list[TopicPartition]]] = []
        self.adds: list[bool] = []  # each call's add_partition (transactions v2)
        self.pending: list[
            tuple[asyncio.Future[Mapping[TopicPartition, int]], list[TopicPartition]]
        ] = []

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        add_partition: bool,
    ) -> Mapping[TopicPartition, int] | asyncio.Future[Mapping[TopicPartition, int]]:
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions)))
        self.adds.append(add_partition)
        if not self.later:
            return dict.fromkeys(partitions, self.code)
        future: asyncio.Future[Mapping[TopicPartition, int]] = (
            asyncio.get_running_loop().create_future()
        )
        self.pending.append((future, list(partitions)))
        return future

    def answer(self) -> None:
        for future, partitions in self.pending:
            future.set_result(dict.fromkeys(partitions, self.code))
        self.pending.clear()


def verified_leader(verifier: Verifier) -> tuple[ReplicaManager, Partition]:
    """A replica manager of broker 1 leading TP alone, verifying with ``verifier``."""
    rm = ReplicaManager(BrokerConfig({"node.id": 1}), {})
    p = partition(1)
    assert p.make_leader(1, 1, [1], [1], now_ms=0)
    rm.partitions[p.tp] = p
    rm.txn_verifier = verifier
    return rm, p
