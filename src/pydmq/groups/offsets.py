"""Committed offsets of the groups of one ``__consumer_offsets`` partition (Kafka's
OffsetMetadataManager).

The manager is part of a :class:`~pydmq.groups.shard.GroupCoordinatorShard`: its state changes
only by :meth:`OffsetMetadataManager.replay` of committed records (read back when the
partition loads, or written by this node and replayed by the coordinator runtime once the high
watermark passed them), so it always equals what a replay of the partition rebuilds. An offset
commit whose append is not committed yet (cluster mode: acks=-1 waits for the ISR) is invisible
to OffsetFetch until it is, and one whose commit fails is never applied, as Kafka's pending
offset commits: otherwise a coordinator cut off from its followers would show offsets that its
successor never sees, and committed offsets would go backwards. Writes are built here as
records (commit, delete, expiry); the runtime appends them. Metadata strings are kept exactly
as committed (control characters and non-ASCII included). The records are
:class:`OffsetCommitRecord` values: a write's records are replayed as built.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydmq.groups.records import OffsetCommitKey, OffsetCommitValue

__all__ = ["OffsetAndMetadata", "OffsetCommitRecord", "OffsetMetadataManager", "TopicPartitionKey"]

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1

    def to_value(self) -> OffsetCommitValue:
        return OffsetCommitValue(
            self.offset,
            self.leader_epoch,
            self.metadata,
            self.commit_timestamp,
            self.expire_timestamp,
        )

    @staticmethod
    def from_value(value: OffsetCommitValue) -> OffsetAndMetadata:
        return OffsetAndMetadata(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
        )


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """An offset commit of ``__consumer_offsets`` (value None: its tombstone)."""

    key: OffsetCommitKey
    value: OffsetCommitValue | None


class OffsetMetadataManager:
    """Group -> partition -> committed offset of one ``__consumer_offsets`` partition; owned
    by its shard's event queue (the coordinator runtime), changed only by replay."""

    __slots__ = ("_offsets",)

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}

    # -- reads -----------------------------------------------------------------------
    def groups(self) -> list[str]:
        return list(self._offsets)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get((topic, partition))

    def all(self, group_id: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def rows(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[tuple[str, int, OffsetAndMetadata | None]]:
        """OffsetFetch's rows: the requested partitions (None: every committed one, sorted)."""
        if topics is None:
            return [(t, p, o) for (t, p), o in sorted(self.all(group_id).items())]
        return [
            (topic, p, self.get(group_id, topic, p))
            for topic, partitions in topics
            for p in partitions
        ]

    def count(self, group_id: str) -> int:
        return len(self._offsets.get(group_id, {}))

    def expired(
        self, group_id: str, now_ms: int, retention_ms: int, base_ms: int | None
    ) -> list[TopicPartitionKey]:
        """Partitions whose offset expired: the explicit expire timestamp if any, else
        ``base_ms`` (when the group became Empty) or the commit time, plus retention."""
        doomed = []
        for tp, o in self._offsets.get(group_id, {}).items():
            deadline = (
                o.expire_timestamp
                if o.expire_timestamp >= 0
                else (o.commit_timestamp if base_ms is None else base_ms) + retention_ms
            )
            if deadline <= now_ms:
                doomed.append(tp)
        return doomed

    # -- records of writes -----------------------------------------------------------
    @staticmethod
    def commit_records(
        group_id: str, offsets: Mapping[TopicPartitionKey, OffsetAndMetadata]
    ) -> list[OffsetCommitRecord]:
        """The records of an offset commit."""
        return [
            OffsetCommitRecord(OffsetCommitKey(group_id, t, p), o.to_value())
            for (t, p), o in offsets.items()
        ]

    def delete_records(
        self, group_id: str, partitions: Iterable[TopicPartitionKey]
    ) -> list[OffsetCommitRecord]:
        """Tombstones of the committed offsets among ``partitions``."""
        current = self._offsets.get(group_id, {})
        return [
            OffsetCommitRecord(OffsetCommitKey(group_id, t, p), None)
            for t, p in partitions
            if (t, p) in current
        ]

    # -- replay ----------------------------------------------------------------------
    def replay(self, record: OffsetCommitRecord) -> None:
        key, value = record.key, record.value
        tp = (key.topic, key.partition)
        if value is None:
            group = self._offsets.get(key.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self._offsets[key.group]
            return
        self._offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata.from_value(value)
