"""The internal compacted topic ``__transaction_state``: partitioning, appends and replay.

A transactional id lives in partition ``abs(java hashCode(id)) % partitions`` (Kafka's
``Utils.abs`` of ``String.hashCode``, as ``__consumer_offsets``); the coordinator of the id is
the leader of that partition. Records are built as RecordBatch v2 and appended as the
partition's leader through ``ReplicaManager.append_records`` with acks=-1 (an internal origin,
as Kafka's TransactionStateManager appends), committed once the high watermark passed them.

Single node: the topic is created on first use (FindCoordinator key type 1 or the first
write), with :func:`transaction_state_topic_configs`. Cluster mode: its creation is asked of
the controller (``TopicCreator.ensure_transaction_state_topic``, replication factor
``transaction.state.log.replication.factor`` capped at the brokers alive, as the offsets
topic's) and the topic appears with a later UpdateMetadata. An append the storage refuses
raises :class:`~pydmq.coordinator.api.CoordinatorWriteError`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, Protocol

from pydmq.coordinator.api import CoordinatorRecord, CoordinatorWriteError
from pydmq.groups.log import java_string_hashcode
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.records import (
    Record,
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.replication.append import AppendResult, ProduceEntry
from pydmq.replication.delayed_produce import PendingAck, await_acks
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.replication.partition import Partition
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionStateHost",
    "TransactionStateLog",
    "transaction_state_topic_configs",
    "transactional_id_partition",
]

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
_RECORDS_PER_BATCH = 500
_READ_BYTES = 1 << 20
_COMMIT_TIMEOUT_MS = 5000


def transaction_state_topic_configs(
    config: BrokerConfig, replication_factor: int
) -> dict[str, str]:
    """The configs ``__transaction_state`` is created with, in both modes (Kafka's
    TransactionLog's): compacted, batches kept as written, ``transaction.state.log.*``
    segment size and ``min.insync.replicas``, the latter capped at the replication factor the
    topic gets (itself capped at the brokers alive, as the offsets topic's: a single node's
    is 1, and Kafka's default minimum of 2 would refuse every write there)."""
    min_isr = min(config.get_int("transaction.state.log.min.isr"), replication_factor)
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(max(1, min_isr)),
        "segment.bytes": str(config.get_int("transaction.state.log.segment.bytes")),
        "unclean.leader.election.enable": "false",
    }


def transactional_id_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % partitions``."""
    h = java_string_hashcode(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class _HostedTopic(Protocol):
    @property
    def partitions(self) -> Sized: ...


class _TopicLookup(Protocol):
    def get(self, name: str) -> _HostedTopic | None: ...


class _TopicCreator(Protocol):
    def create_topic(
        self, name: str, *, num_partitions: int, configs: Mapping[str, str | None]
    ) -> object:
        """Create ``name`` at once (a single node); raises TopicError."""
        ...

    def ensure_transaction_state_topic(self) -> Awaitable[int]:
        """Ask the controller for ``__transaction_state`` (cluster mode)."""
        ...


class TransactionStateHost(Protocol):
    """What ``__transaction_state`` needs of its node (the broker): config, topics, a way to
    create a topic, the replica manager, and whether it runs in a cluster."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> _TopicLookup: ...

    @property
    def topic_creator(self) -> _TopicCreator: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class TransactionStateLog:
    """``__transaction_state`` of one broker: the
    :class:`~pydmq.coordinator.api.CoordinatorLog` of the transaction coordinator's runtime.
    Owned by the event loop."""

    def __init__(self, host: TransactionStateHost, timeout_ms: int = _COMMIT_TIMEOUT_MS) -> None:
        self._host = host
        self._timeout_ms = timeout_ms
        self._waiting: set[asyncio.Task[None]] = set()
        self._creation: asyncio.Future[Any] | None = None

    @property
    def cluster_mode(self) -> bool:
        return self._host.config.is_cluster_mode

    @property
    def exists(self) -> bool:
        return self._host.topics.get(TRANSACTION_STATE_TOPIC) is not None

    @property
    def num_partitions(self) -> int:
        topic = self._host.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self._host.config.get_int("transaction.state.log.num.partitions")

    def partition_for(self, transactional_id: str) -> int:
        return transactional_id_partition(transactional_id, self.num_partitions)

    def ensure_created(self) -> None:
        """Single node: create the topic now (raises TopicError). Cluster mode: ask the
        controller, at most one request in flight; the topic comes with UpdateMetadata."""
        if self.exists:
            return
        creator = self._host.topic_creator
        if self.cluster_mode:
            if self._creation is not None and not self._creation.done():
                return
            result = creator.ensure_transaction_state_topic()
            if inspect.isawaitable(result):
                self._creation = asyncio.ensure_future(result)
                self._creation.add_done_callback(_log_creation_failure)
            return
        config = self._host.config
        creator.create_topic(
            TRANSACTION_STATE_TOPIC,
            num_partitions=config.get_int("transaction.state.log.num.partitions"),
            configs=transaction_state_topic_configs(config, 1),
        )
        log.info("created %s", TRANSACTION_STATE_TOPIC)

    # -- CoordinatorLog ------------------------------------------------------------------
    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        if not records:
            return None
        if not self.cluster_mode:
            try:
                self.ensure_created()
            except TopicError as exc:
                raise CoordinatorWriteError(exc.error_code, exc.message) from None
        pending: asyncio.Future[int] | None = None
        for start in range(0, len(records), _RECORDS_PER_BATCH):
            chunk = records[start : start + _RECORDS_PER_BATCH]
            batch = build_batch([SimpleRecord(k, v) for k, v in chunk])
            waiter = self._append_batch(partition, memoryview(bytearray(batch)))
            if waiter is not None:
                pending = waiter  # the last batch committing commits the earlier ones
        return pending

    def _append_batch(self, partition: int, batch: memoryview) -> asyncio.Future[int] | None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        answer = self._host.replica_manager.append_records(
            [ProduceEntry(tp, batch)], -1, self._timeout_ms
        )
        if not isinstance(answer, list):
            future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._track(_settle(answer, future))
            return future
        [result] = answer
        if result.error_code != ErrorCode.NONE:
            raise CoordinatorWriteError(
                result.error_code,
                result.error_message or f"{tp}: {ErrorCode(result.error_code).name}",
            )
        return None

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        hosted = self._host.replica_manager.get(tp)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if hosted is None:
            future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return future
        required_offset = hosted.log.log_end_offset
        if hosted.high_watermark >= required_offset:
            return None
        self._track(self._await_high_watermark(hosted, required_offset, future))
        return future

    def replay_partition(self, partition: int) -> Iterator[Record]:
        hosted = self._host.replica_manager.get(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        if hosted is None:
            return
        unified = hosted.log
        offset = unified.log_start_offset
        end = unified.log_end_offset
        while offset < end:
            data = unified.read(offset, _READ_BYTES, end, True)
            if not data.buffers:
                break
            buf = b"".join(bytes(b) for b in data.buffers)
            next_offset = offset
            for header in iter_batch_headers(buf):
                next_offset = header.next_offset
                if header.is_control:
                    continue
                validate_crc(buf, header)
                for record in decode_records(buf, header):
                    if record.offset >= offset:
                        yield record
            if next_offset <= offset:
                break
            offset = next_offset

    # -- internals -----------------------------------------------------------------------
    def _track(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    async def _await_high_watermark(
        self, hosted: Partition, required_offset: int, future: asyncio.Future[int]
    ) -> None:
        def report(code: int) -> None:
            if code == ErrorCode.REQUEST_TIMED_OUT or future.done():
                return  # not yet: wait again
            committed = code in (ErrorCode.NONE, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            future.set_result(ErrorCode.NONE if committed else code)

        purgatory = self._host.replica_manager.produce_purgatory
        while not future.done():
            await await_acks(
                purgatory, [PendingAck(hosted, required_offset, report)], self._timeout_ms
            )


async def _settle(answer: Awaitable[list[AppendResult]], future: asyncio.Future[int]) -> None:
    [result] = await answer
    if not future.done():
        future.set_result(result.error_code)


def _log_creation_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("creating %s failed: %s", TRANSACTION_STATE_TOPIC, future.exception())
