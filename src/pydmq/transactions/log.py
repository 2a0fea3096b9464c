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
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydmq.coordinator.api import CoordinatorRecord, CoordinatorWriteError, TopicLookup
from pydmq.coordinator.partitions import InternalTopicPartitions
from pydmq.groups.log import java_string_hashcode
from pydmq.protocol.errors import TopicError
from pydmq.protocol.records import (
    Record,
)

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
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
    def topics(self) -> TopicLookup: ...

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
        self._partitions = InternalTopicPartitions(
            TRANSACTION_STATE_TOPIC, lambda: host.replica_manager, timeout_ms
        )
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
        return self._partitions.append_records(partition, records, _RECORDS_PER_BATCH)

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        return self._partitions.await_log_end(partition)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        return self._partitions.data_records(partition)


def _log_creation_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("creating %s failed: %s", TRANSACTION_STATE_TOPIC, future.exception())
