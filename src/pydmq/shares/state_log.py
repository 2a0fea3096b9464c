"""The internal compacted topic ``__share_group_state``: where share-partition state is kept.

The share coordinator's log (KIP-932): one ShareSnapshot record (Kafka's key and value layout,
:mod:`pydmq.shares.generated_records`) per (group, topic id, partition), rewritten whole after
each change the records' states went through (acknowledgements, releases, lock expiries), so
compaction keeps the last one; a tombstone when the state is deleted. Acquired records are
written as AVAILABLE with their delivery count (an acquisition does not survive a restart or a
leader change; the delivery it made is counted).

A share-partition's state lives in partition ``abs(java hashCode("group:topicId:partition")) %
partitions`` (Kafka's share coordinator key), whose leader is its share coordinator
(:mod:`pydmq.shares.coordinator`). :class:`ShareStateLog` is that coordinator's
:class:`~pydmq.coordinator.api.CoordinatorLog`: appends as leader with acks=-1, replays at
load. The topic is created on first use with ``share.coordinator.state.topic.*``: by a single
node at once, in cluster mode by the controller (asked through the topic creator; the topic
comes with a later UpdateMetadata). Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import uuid
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from pydmq.config.broker import BrokerConfig
from pydmq.config.share import (
    STATE_TOPIC_MIN_ISR,
    STATE_TOPIC_PARTITIONS,
    STATE_TOPIC_SEGMENT_BYTES,
)
from pydmq.coordinator.api import CoordinatorRecord, CoordinatorWriteError, TopicLookup
from pydmq.coordinator.partitions import InternalTopicPartitions
from pydmq.groups.log import java_string_hashcode
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.records import Record
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.shares.generated_records import (
    ShareSnapshotValue,
    StateBatch,
)
from pydmq.shares.partition import InFlightRecord, RecordState, SharePartition

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "ShareStateHost",
    "ShareStateLog",
    "StateKey",
    "restore",
    "share_state_partition",
    "share_state_topic_configs",
    "snapshot_of",
]

log = logging.getLogger(__name__)

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
_COMMIT_TIMEOUT_MS = 5000

StateKey = tuple[str, uuid.UUID, int]
"""A share-partition: (group id, topic id, partition index)."""


def share_state_partition(key: StateKey, partitions: int) -> int:
    """Kafka's ``Utils.abs(("group:topicId:partition").hashCode) % partitions``, the topic id
    in Kafka's form (URL-safe base64 without padding)."""
    group_id, topic_id, partition = key
    topic = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    h = java_string_hashcode(f"{group_id}:{topic}:{partition}")
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def share_state_topic_configs(config: BrokerConfig, replication_factor: int) -> dict[str, str]:
    """The configs ``__share_group_state`` is created with, in both modes: compacted,
    uncompressed, ``share.coordinator.state.topic.segment.bytes``, and
    ``share.coordinator.state.topic.min.isr`` capped at the replication factor it gets."""
    min_isr = min(config.get_int(STATE_TOPIC_MIN_ISR), replication_factor)
    return {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": str(max(1, min_isr)),
        "segment.bytes": str(config.get_int(STATE_TOPIC_SEGMENT_BYTES)),
        "unclean.leader.election.enable": "false",
    }


class _TopicCreator(Protocol):
    def create_topic(
        self, name: str, *, num_partitions: int, configs: Mapping[str, str | None]
    ) -> object: ...

    def ensure_share_state_topic(self) -> Awaitable[int]:
        """Ask the controller for ``__share_group_state`` (cluster mode)."""
        ...


class ShareStateHost(Protocol):
    """What ``__share_group_state`` needs of its node (the broker)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> TopicLookup: ...

    @property
    def topic_creator(self) -> _TopicCreator: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


def snapshot_of(
    share_partition: SharePartition, leader_epoch: int, now_ms: int, state_epoch: int = 0
) -> ShareSnapshotValue:
    """The ShareSnapshot value of a share-partition's state now (runs of equal state and
    delivery count; ACQUIRED written as AVAILABLE)."""
    batches: list[StateBatch] = []
    complete = 0
    for offset, record in share_partition.in_flight():
        state = RecordState.AVAILABLE if record.state is RecordState.ACQUIRED else record.state
        if state is not RecordState.AVAILABLE:
            complete += 1
        last = batches[-1] if batches else None
        if (
            last is not None
            and last.last_offset == offset - 1
            and last.delivery_state == state
            and last.delivery_count == record.delivery_count
        ):
            batches[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
        else:
            batches.append(StateBatch(offset, offset, state, record.delivery_count))
    return ShareSnapshotValue(
        snapshot_epoch=0,
        state_epoch=state_epoch,
        leader_epoch=leader_epoch,
        start_offset=share_partition.start_offset,
        create_timestamp=now_ms,
        write_timestamp=now_ms,
        state_batches=tuple(batches),
        delivery_complete_count=complete,
    )


def restore(share_partition: SharePartition, snapshot: ShareSnapshotValue) -> None:
    """Load ``snapshot`` into ``share_partition``."""
    records = [
        (offset, InFlightRecord(RecordState(b.delivery_state), b.delivery_count))
        for b in snapshot.state_batches
        for offset in range(b.first_offset, b.last_offset + 1)
    ]
    share_partition.restore(snapshot.start_offset, records)


class ShareStateLog:
    """``__share_group_state`` of one node (see the module): the share coordinator's
    :class:`~pydmq.coordinator.api.CoordinatorLog`."""

    def __init__(self, host: ShareStateHost, timeout_ms: int = _COMMIT_TIMEOUT_MS) -> None:
        self._host = host
        self._partitions = InternalTopicPartitions(
            SHARE_GROUP_STATE_TOPIC, lambda: host.replica_manager, timeout_ms
        )
        self._creation: asyncio.Future[Any] | None = None

    @property
    def cluster_mode(self) -> bool:
        return self._host.config.is_cluster_mode

    @property
    def exists(self) -> bool:
        topic = self._host.topics.get(SHARE_GROUP_STATE_TOPIC)
        return topic is not None and bool(topic.partitions)

    @property
    def num_partitions(self) -> int:
        topic = self._host.topics.get(SHARE_GROUP_STATE_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self._host.config.get_int(STATE_TOPIC_PARTITIONS)

    def partition_for(self, key: StateKey) -> int:
        return share_state_partition(key, self.num_partitions)

    def ensure_created(self) -> bool:
        """Whether the topic exists now. Single node: created at once (raises TopicError).
        Cluster mode: its creation asked of the controller (one request in flight at most)."""
        if self.exists:
            return True
        creator = self._host.topic_creator
        if self.cluster_mode:
            if self._creation is None or self._creation.done():
                result = creator.ensure_share_state_topic()
                if inspect.isawaitable(result):
                    self._creation = asyncio.ensure_future(result)
                    self._creation.add_done_callback(_log_creation_failure)
            return False
        config = self._host.config
        creator.create_topic(
            SHARE_GROUP_STATE_TOPIC,
            num_partitions=config.get_int(STATE_TOPIC_PARTITIONS),
            configs=share_state_topic_configs(config, 1),
        )
        log.info("created %s", SHARE_GROUP_STATE_TOPIC)
        return True

    # -- CoordinatorLog ------------------------------------------------------------------
    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        if not records:
            return None
        try:
            if not self.ensure_created():
                raise CoordinatorWriteError(ErrorCode.NOT_COORDINATOR)
        except TopicError as exc:
            raise CoordinatorWriteError(exc.error_code, exc.message) from None
        return self._partitions.append_records(partition, records)

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        return self._partitions.await_log_end(partition)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        return self._partitions.data_records(partition)


def _log_creation_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("creating %s failed: %s", SHARE_GROUP_STATE_TOPIC, future.exception())
