"""The internal compacted topic ``__share_group_state``: share-partition state, persisted.

The share coordinator's log (KIP-932): one ShareSnapshot record (Kafka's key and value
layout, :mod:`pydmq.shares.generated_records`) per (group, topic id, partition), rewritten
whole after each change the records' states went through (acknowledgements, releases, lock
expiries), so compaction keeps the last one; a tombstone when the group is deleted. Acquired
records are written as AVAILABLE with their delivery count (an acquisition does not survive a
restart; the delivery it made is counted). At start the topic is read back, the last record
of each key winning.

Single node only: the topic is created with one partition at the first write
(``share.coordinator.state.topic.*`` are not applied); cluster mode does not persist share
state yet (docs/SHARE_GROUPS.md). Owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import Protocol

from pydmq.config.broker import BrokerConfig
from pydmq.coordinator.api import TopicLookup
from pydmq.coordinator.partitions import InternalTopicPartitions
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.shares.generated_records import (
    KEY_VERSIONS,
    ShareSnapshotKey,
    ShareSnapshotValue,
    StateBatch,
    decode_key,
    decode_share_snapshot_value,
)
from pydmq.shares.partition import InFlightRecord, RecordState, SharePartition

__all__ = [
    "SHARE_GROUP_STATE_TOPIC",
    "ShareGroupStateLog",
    "ShareStateHost",
    "restore",
    "snapshot_of",
]

log = logging.getLogger(__name__)

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
_COMMIT_TIMEOUT_MS = 5000

# (group id, topic id, partition index)
StateKey = tuple[str, uuid.UUID, int]


class _TopicCreator(Protocol):
    def create_topic(
        self, name: str, *, num_partitions: int, configs: Mapping[str, str | None]
    ) -> object: ...


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
    share_partition: SharePartition, leader_epoch: int, now_ms: int
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
        state_epoch=0,
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


class ShareGroupStateLog:
    """``__share_group_state`` of a single node (see the module)."""

    def __init__(self, host: ShareStateHost, timeout_ms: int = _COMMIT_TIMEOUT_MS) -> None:
        self._host = host
        self._partitions = InternalTopicPartitions(
            SHARE_GROUP_STATE_TOPIC, lambda: host.replica_manager, timeout_ms
        )

    @property
    def enabled(self) -> bool:
        """Whether share state is persisted here (a single node)."""
        return not self._host.config.is_cluster_mode

    def write(self, key: StateKey, value: ShareSnapshotValue | None) -> asyncio.Future[int] | None:
        """Append the snapshot of ``key`` (a tombstone for None); a future when the append
        is still to be committed."""
        if not self.enabled:
            return None
        if self._host.topics.get(SHARE_GROUP_STATE_TOPIC) is None:
            self._host.topic_creator.create_topic(
                SHARE_GROUP_STATE_TOPIC,
                num_partitions=1,
                configs={"cleanup.policy": "compact", "compression.type": "uncompressed"},
            )
            log.info("created %s", SHARE_GROUP_STATE_TOPIC)
        group_id, topic_id, partition = key
        record = SimpleRecord(
            ShareSnapshotKey(group_id, topic_id, partition).encode(),
            None if value is None else value.encode(),
        )
        batch = build_batch([record])
        return self._partitions.append_batch(0, memoryview(bytearray(batch)))

    def load(self) -> dict[StateKey, ShareSnapshotValue]:
        """Every share-partition's last snapshot (tombstoned keys left out)."""
        snapshots: dict[StateKey, ShareSnapshotValue] = {}
        if not self.enabled:
            return snapshots
        for header, records in self._partitions.read_batches(0):
            if header.is_control:
                continue
            for record in records:
                if record.key is None or int.from_bytes(record.key[:2], "big") not in KEY_VERSIONS:
                    continue
                key = decode_key(record.key)
                state_key = (key.group_id, key.topic_id, key.partition)
                if record.value is None:
                    snapshots.pop(state_key, None)
                else:
                    snapshots[state_key] = decode_share_snapshot_value(record.value)
        return snapshots
