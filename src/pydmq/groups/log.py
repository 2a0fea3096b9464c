"""The internal compacted topic ``__consumer_offsets``: partitioning, appends and replay.

A group lives in partition ``abs(java_string_hashcode(group_id)) % partitions`` (Kafka's
``Utils.abs`` of ``String.hashCode``); the coordinator of the group is the leader of that
partition. Records are built as RecordBatch v2 and handed to an :class:`OffsetsTopicWriter`,
which appends them to the partition's leader log (the produce path: validation, offset
assignment, fetch wake-up) and tells when they are committed.

Single-node mode: the topic is created internal (:func:`offsets_topic_configs`, as in cluster
mode) on first use with ``offsets.topic.num.partitions`` partitions (if someone created it first, its actual partition
count is used), and an append is committed as soon as it is in the log (the high watermark
follows the log end offset). Cluster mode: the controller creates the topic (FindCoordinator
asks for it), and an append is committed once the high watermark passed it (acks=-1): the
writer returns a future the coordinator awaits before answering.

An append the storage refuses (a full disk, an offline log dir), like the creation of the
topic on first use, raises :class:`~pydmq.coordinator.api.CoordinatorWriteError` with
KAFKA_STORAGE_ERROR, which the
group APIs answer as NOT_COORDINATOR (Kafka's mapping): clients look the coordinator up again
and retry. Nothing of a refused append is in the log or in the coordinator's state.

Transactions (the log is a :class:`~pydmq.coordinator.api.TransactionalCoordinatorLog`): the
offsets of a TxnOffsetCommit are appended as a transactional batch carrying the producer id
and epoch (no sequence, as Kafka's coordinator writes it), so the partition's producer state
tracks the open transaction (the last stable offset, the cleaner); the transaction coordinator's
marker (WriteTxnMarkers) is appended as a COMMIT/ABORT control batch of that producer, which
the producer state validates (an older producer epoch: INVALID_PRODUCER_EPOCH). A load reads
the partition batch by batch, control batches included.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydmq.coordinator.api import (
    CoordinatorBatch,
    CoordinatorRecord,
    CoordinatorWriteError,
    TopicLookup,
    TransactionResult,
)
from pydmq.coordinator.partitions import InternalTopicPartitions
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.records import (
    ControlRecordType,
    CorruptRecordError,
    Record,
    SimpleRecord,
    build_batch,
    parse_end_txn_marker,
)
from pydmq.replication.txn_markers import TxnMarkerEntry
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import AppendOrigin

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = [
    "OFFSETS_TOPIC",
    "ConsumerOffsetsLog",
    "OffsetsLogHost",
    "OffsetsTopicWriter",
    "ReplicaManagerOffsetsWriter",
    "is_cluster_mode",
    "java_string_hashcode",
    "offsets_topic_configs",
    "partition_for",
]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_RECORDS_PER_BATCH = 500
_COMMIT_TIMEOUT_MS = 5000  # Kafka's offsets.commit.timeout.ms default


def offsets_topic_configs(config: BrokerConfig) -> dict[str, str]:
    """The configs ``__consumer_offsets`` is created with, in both modes (Kafka's group
    coordinator's): compacted, batches kept as the coordinator compressed them,
    ``offsets.topic.segment.bytes`` segments (small segments get cleaned and load fast)."""
    return {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.get_int("offsets.topic.segment.bytes")),
    }


def java_string_hashcode(s: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units), as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def is_cluster_mode(config: object) -> bool:
    """``BrokerConfig.is_cluster_mode`` (a property or a method), False when absent."""
    value: Any = getattr(config, "is_cluster_mode", False)
    if callable(value):
        value = value()
    return bool(value)


class OffsetsTopicWriter(Protocol):
    """Appends one record batch to ``__consumer_offsets`` partition ``partition`` as its leader.

    The append happens before ``append`` returns (so records land in the order the coordinator
    changed its state) with acks=-1 semantics; raises :class:`CoordinatorWriteError` when nothing
    was appended. Returns None when the batch is already committed (the high watermark passed
    its last offset: always so in single-node mode), else a future resolved with 0 once it is,
    or with a produce error code when it cannot be any more (NOT_LEADER_OR_FOLLOWER on a
    leadership change, REQUEST_TIMED_OUT after ``offsets.commit.timeout.ms``). The future is
    awaited by several requests: resolve it, never cancel it.
    """

    def append(self, partition: int, batch: memoryview) -> asyncio.Future[int] | None: ...

    def append_end_txn_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        transaction_version: int,
    ) -> asyncio.Future[int] | None:
        """Append the COMMIT (``commit``) or ABORT marker of ``producer_id``'s transaction
        (of the coordinator's ``transaction_version``), with :meth:`append`'s rules."""
        ...

    def await_log_end(self, partition: int) -> asyncio.Future[int] | None:
        """See :meth:`pydmq.coordinator.api.CoordinatorLog.await_committed`."""
        ...


class _TopicCreator(Protocol):
    def create_topic(
        self, name: str, *, num_partitions: int, configs: Mapping[str, str | None]
    ) -> object:
        """Create ``name`` at once; raises :class:`~pydmq.protocol.errors.TopicError`."""
        ...


class OffsetsLogHost(Protocol):
    """What ``__consumer_offsets`` needs from its node (the :class:`~pydmq.broker.server.Broker`):
    its config, the topics it knows, a way to create a topic, and its replica manager."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> TopicLookup: ...

    @property
    def topic_creator(self) -> _TopicCreator: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


class ReplicaManagerOffsetsWriter:
    """The writer over the broker's replica manager: an acks=-1 produce of the coordinator,
    through ``ReplicaManager.append_records`` as Kafka's coordinator appends through
    ``appendRecords`` (an internal origin: no produce-request checks).

    The leader checks and the append happen at once (refused before appending when the ISR
    is below the minimum: :class:`CoordinatorWriteError`). When the high watermark did not
    pass the batch at once (cluster mode), the returned future is settled by the
    delayed-produce purgatory: NONE once committed, NOT_LEADER_OR_FOLLOWER on a leadership
    change, NOT_ENOUGH_REPLICAS_AFTER_APPEND, or REQUEST_TIMED_OUT after
    ``offsets.commit.timeout.ms``. Its waiting tasks run on the broker's event loop.
    """

    def __init__(self, broker: OffsetsLogHost, timeout_ms: int = _COMMIT_TIMEOUT_MS) -> None:
        self._broker = broker
        self._partitions = InternalTopicPartitions(
            OFFSETS_TOPIC, lambda: broker.replica_manager, timeout_ms
        )

    def append(self, partition: int, batch: memoryview) -> asyncio.Future[int] | None:
        return self._partitions.append_batch(partition, batch, AppendOrigin.COORDINATOR)

    def append_end_txn_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        transaction_version: int,
    ) -> asyncio.Future[int] | None:
        """The marker appended through the replica manager's marker path (the one
        WriteTxnMarkers takes for every other partition: the producer state checks the
        producer and coordinator epochs, an ABORT enters the aborted-transaction index).
        Raises :class:`CoordinatorWriteError` when nothing was appended."""
        entry = TxnMarkerEntry(
            TopicPartition(OFFSETS_TOPIC, partition),
            producer_id,
            producer_epoch,
            coordinator_epoch,
            commit,
            transaction_version,
        )
        waiting = self._broker.replica_manager.append_txn_markers(
            [entry], self._partitions.timeout_ms
        )
        if waiting is None:
            if entry.error_code != ErrorCode.NONE:
                raise CoordinatorWriteError(
                    entry.error_code, f"{entry.tp}: {ErrorCode(entry.error_code).name}"
                )
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._partitions.track(_settle_marker(waiting, entry, future))
        return future

    def await_log_end(self, partition: int) -> asyncio.Future[int] | None:
        """See :meth:`pydmq.coordinator.api.CoordinatorLog.await_committed` (through the
        purgatory, ``offsets.commit.timeout.ms`` at a time)."""
        return self._partitions.await_log_end(partition)


async def _settle_marker(
    waiting: Awaitable[None], entry: TxnMarkerEntry, future: asyncio.Future[int]
) -> None:
    """Resolve ``future`` with the code of the marker's append once its wait settled (a
    refusal before the append, a leadership change or a timeout after it)."""
    await waiting
    if not future.done():
        future.set_result(entry.error_code)


class ConsumerOffsetsLog:
    """``__consumer_offsets`` of one broker: group records in, records back out at load (the
    :class:`~pydmq.coordinator.api.CoordinatorLog` of the group coordinator's runtime)."""

    def __init__(self, broker: OffsetsLogHost, writer: OffsetsTopicWriter | None = None) -> None:
        self._broker = broker
        self.writer: OffsetsTopicWriter = (
            writer if writer is not None else ReplicaManagerOffsetsWriter(broker)
        )
        self._reader = InternalTopicPartitions(
            OFFSETS_TOPIC, lambda: broker.replica_manager, _COMMIT_TIMEOUT_MS
        )
        self._creation: asyncio.Future[Any] | None = None

    @property
    def cluster_mode(self) -> bool:
        return is_cluster_mode(self._broker.config)

    @property
    def exists(self) -> bool:
        return self._broker.topics.get(OFFSETS_TOPIC) is not None

    @property
    def num_partitions(self) -> int:
        topic = self._broker.topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self._broker.config.get_int("offsets.topic.num.partitions")

    def ensure_created(self) -> None:
        """Single-node mode: create the topic here. Cluster mode: ask the controller (see
        :meth:`request_creation`); the topic appears with a later UpdateMetadata."""
        if self.exists:
            return
        if self.cluster_mode:
            self.request_creation()
            return
        self._broker.topic_creator.create_topic(
            OFFSETS_TOPIC,
            num_partitions=self._broker.config.get_int("offsets.topic.num.partitions"),
            configs=offsets_topic_configs(self._broker.config),
        )
        log.info("created %s", OFFSETS_TOPIC)

    def request_creation(self) -> None:
        """Cluster mode: ``broker.topic_creator.ensure_offsets_topic()`` (forwarded to the
        controller; may return an awaitable), at most one request in flight."""
        if self._creation is not None and not self._creation.done():
            return
        ensure = getattr(self._broker.topic_creator, "ensure_offsets_topic", None)
        if ensure is None:
            log.warning("cannot create %s: no ensure_offsets_topic", OFFSETS_TOPIC)
            return
        result = ensure()
        if inspect.isawaitable(result):
            self._creation = asyncio.ensure_future(result)
            self._creation.add_done_callback(_log_creation_failure)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        """Append ``(key, value)`` records (value None = tombstone) to ``partition``.

        Returns None when committed, else a future of the commit's error code (see
        :class:`OffsetsTopicWriter`); raises :class:`CoordinatorWriteError` if nothing was
        appended."""
        return self._append_batches(partition, records, -1, -1)

    def append_transactional(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_id: int,
        producer_epoch: int,
    ) -> asyncio.Future[int] | None:
        """:meth:`append` as transactional batches of ``producer_id`` at ``producer_epoch``
        (see :meth:`pydmq.coordinator.api.TransactionalCoordinatorLog.append_transactional`)."""
        return self._append_batches(partition, records, producer_id, producer_epoch)

    def append_end_txn_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        transaction_version: int,
    ) -> asyncio.Future[int] | None:
        """Append the COMMIT/ABORT control batch of ``producer_id``'s transaction (see
        :meth:`pydmq.coordinator.api.TransactionalCoordinatorLog.append_end_txn_marker`)."""
        self._ensure_created()
        commit = result is TransactionResult.COMMIT
        return self.writer.append_end_txn_marker(
            partition, producer_id, producer_epoch, coordinator_epoch, commit, transaction_version
        )

    def _ensure_created(self) -> None:
        if not self.cluster_mode:
            try:
                self.ensure_created()
            except TopicError as exc:  # e.g. a full disk: KAFKA_STORAGE_ERROR
                raise CoordinatorWriteError(exc.error_code, exc.message) from None

    def _append_batches(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_id: int,
        producer_epoch: int,
    ) -> asyncio.Future[int] | None:
        if not records:
            return None
        self._ensure_created()
        pending: asyncio.Future[int] | None = None
        for start in range(0, len(records), _RECORDS_PER_BATCH):
            chunk = records[start : start + _RECORDS_PER_BATCH]
            batch = build_batch(
                [SimpleRecord(k, v) for k, v in chunk],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                is_transactional=producer_id >= 0,
            )
            waiter = self.writer.append(partition, memoryview(bytearray(batch)))
            if waiter is not None:
                pending = waiter  # the last batch committing commits the earlier ones
        return pending

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        """See :meth:`pydmq.coordinator.api.CoordinatorLog.await_committed`."""
        return self.writer.await_log_end(partition)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        """The records of ``partition`` up to its current log end offset (control batches
        skipped)."""
        for batch in self.replay_batches(partition):
            if batch.end_txn is None:
                yield from batch.records

    def replay_batches(self, partition: int) -> Iterator[CoordinatorBatch]:
        """The batches of ``partition`` up to its current log end offset, control batches
        (end-transaction markers) included; a control batch of another type is skipped."""
        for header, records in self._reader.read_batches(partition):
            pid, epoch = header.producer_id, header.producer_epoch
            if not header.is_control:
                yield CoordinatorBatch(pid, epoch, header.is_transactional, records)
                continue
            result = _end_txn_result(records)
            if result is not None:
                yield CoordinatorBatch(pid, epoch, header.is_transactional, (), result)


def _end_txn_result(records: Sequence[Record]) -> TransactionResult | None:
    """The result a control batch's marker carries; None for another control record."""
    if not records:
        return None
    try:
        marker = parse_end_txn_marker(records[0])
    except CorruptRecordError:
        log.warning("skipping a control batch of %s that is not an end-txn marker", OFFSETS_TOPIC)
        return None
    if marker.control_type == ControlRecordType.COMMIT:
        return TransactionResult.COMMIT
    return TransactionResult.ABORT


def _log_creation_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("creating %s failed: %s", OFFSETS_TOPIC, future.exception())
