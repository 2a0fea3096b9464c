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

Transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) are records of transactional batches:
:meth:`OffsetMetadataManager.replay_transactional` keeps them PENDING per producer id,
invisible to OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT for such a partition when asked
for stable offsets), until the producer's end-transaction marker is replayed
(:meth:`OffsetMetadataManager.replay_end_transaction_marker`): COMMIT moves them into the
committed offsets, ABORT drops them. As in Kafka, a transactional offset only replaces a
committed one written after it in the log (a plain commit appended after the transactional one
wins), so each offset remembers its place in the log: the replay order, which is the log's
order both at load and live (the runtime replays writes in append order). A tombstone deletes
the committed offset and every pending one of its partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydmq.groups.records import OffsetCommitKey, OffsetCommitValue
from pydmq.protocol.errors import ErrorCode

__all__ = ["OffsetAndMetadata", "OffsetCommitRecord", "OffsetMetadataManager", "TopicPartitionKey"]

TopicPartitionKey = tuple[str, int]

_Placed = tuple[int, "OffsetAndMetadata"]
"""An offset and its place in the log (the replay order of its record)."""


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
    """Group -> partition -> committed offset of one ``__consumer_offsets`` partition, and
    the pending transactional offsets by producer id; owned by its shard's event queue (the
    coordinator runtime), changed only by replay."""

    __slots__ = ("_offsets", "_open", "_pending", "_placed", "_replayed")

    def __init__(self) -> None:
        self._offsets: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        self._placed: dict[tuple[str, TopicPartitionKey], int] = {}  # committed: its place
        # producer id -> group -> partition -> pending offset (Kafka's
        # pendingTransactionalOffsets) and group -> partition -> producer ids (its
        # openTransactions)
        self._pending: dict[int, dict[str, dict[TopicPartitionKey, _Placed]]] = {}
        self._open: dict[str, dict[TopicPartitionKey, set[int]]] = {}
        self._replayed = 0

    # -- reads -----------------------------------------------------------------------
    def groups(self) -> list[str]:
        """The groups with committed or pending transactional offsets."""
        return list(self._offsets.keys() | self._open.keys())

    def has_offsets(self, group_id: str) -> bool:
        """True when the group has committed or pending transactional offsets."""
        return bool(self._offsets.get(group_id)) or group_id in self._open

    def has_pending(self, group_id: str) -> bool:
        """True when an open transaction holds offsets of the group."""
        return group_id in self._open

    def pending_partitions(self, group_id: str) -> list[TopicPartitionKey]:
        """The partitions of the group with pending transactional offsets."""
        return list(self._open.get(group_id, ()))

    def pending(self, producer_id: int) -> dict[str, dict[TopicPartitionKey, OffsetAndMetadata]]:
        """The pending transactional offsets of ``producer_id``, by group."""
        return {
            group: {tp: placed[1] for tp, placed in offsets.items()}
            for group, offsets in self._pending.get(producer_id, {}).items()
        }

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get((topic, partition))

    def all(self, group_id: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    def rows(
        self,
        group_id: str,
        topics: Sequence[tuple[str, Sequence[int]]] | None,
        *,
        require_stable: bool = False,
    ) -> list[tuple[str, int, OffsetAndMetadata | int | None]]:
        """OffsetFetch's rows: the requested partitions (None: every committed one, sorted).
        With ``require_stable``, a partition with pending transactional offsets of the group
        has the error UNSTABLE_OFFSET_COMMIT instead of its offset (Kafka's answer: clients
        retry until the transaction ended)."""
        if topics is None:
            wanted: list[TopicPartitionKey] = sorted(self._offsets.get(group_id, {}))
        else:
            wanted = [(topic, p) for topic, partitions in topics for p in partitions]
        open_ = self._open.get(group_id, {}) if require_stable else {}
        committed = self._offsets.get(group_id, {})
        return [
            (t, p, ErrorCode.UNSTABLE_OFFSET_COMMIT if (t, p) in open_ else committed.get((t, p)))
            for t, p in wanted
        ]

    def count(self, group_id: str) -> int:
        return len(self._offsets.get(group_id, {}))

    def expired(
        self, group_id: str, now_ms: int, retention_ms: int, base_ms: int | None
    ) -> list[TopicPartitionKey]:
        """Partitions whose offset expired: the explicit expire timestamp if any, else
        ``base_ms`` (when the group became Empty) or the commit time, plus retention. An
        offset with pending transactional offsets of its partition does not expire yet."""
        doomed = []
        open_ = self._open.get(group_id, {})
        for tp, o in self._offsets.get(group_id, {}).items():
            if tp in open_:
                continue
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
        """Tombstones of the committed or pending transactional offsets among
        ``partitions`` (Kafka's OffsetDelete and group deletion: a tombstone also drops the
        pending offsets of its partition)."""
        current = self._offsets.get(group_id, {})
        open_ = self._open.get(group_id, {})
        return [
            OffsetCommitRecord(OffsetCommitKey(group_id, t, p), None)
            for t, p in dict.fromkeys(partitions)
            if (t, p) in current or (t, p) in open_
        ]

    def all_partitions(self, group_id: str) -> list[TopicPartitionKey]:
        """The partitions with a committed or a pending transactional offset of the group."""
        return list(
            dict.fromkeys([*self._offsets.get(group_id, ()), *self._open.get(group_id, ())])
        )

    # -- replay ----------------------------------------------------------------------
    def replay(self, record: OffsetCommitRecord) -> None:
        """Apply a committed record of a plain (non-transactional) batch."""
        self._replayed += 1
        key, value = record.key, record.value
        tp = (key.topic, key.partition)
        if value is None:
            self._remove(key.group, tp)
            self._drop_pending(key.group, tp)
            return
        self._put(key.group, tp, (self._replayed, OffsetAndMetadata.from_value(value)))

    def replay_transactional(self, record: OffsetCommitRecord, producer_id: int) -> None:
        """Apply a committed record of ``producer_id``'s transaction: an offset is kept
        pending until the transaction ends (a tombstone is applied at once, as Kafka does)."""
        if record.value is None:
            self.replay(record)
            return
        self._replayed += 1
        key = record.key
        tp = (key.topic, key.partition)
        placed = (self._replayed, OffsetAndMetadata.from_value(record.value))
        self._pending.setdefault(producer_id, {}).setdefault(key.group, {})[tp] = placed
        self._open.setdefault(key.group, {}).setdefault(tp, set()).add(producer_id)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """``producer_id``'s transaction ended: its pending offsets become committed (each
        unless a commit written after it in the log is there) or are dropped."""
        self._replayed += 1
        pending = self._pending.pop(producer_id, None)
        if pending is None:
            return
        for group_id, offsets in pending.items():
            for tp, placed in offsets.items():
                self._close(group_id, tp, producer_id)
                if committed and placed[0] > self._placed.get((group_id, tp), -1):
                    self._put(group_id, tp, placed)

    def _put(self, group_id: str, tp: TopicPartitionKey, placed: _Placed) -> None:
        self._offsets.setdefault(group_id, {})[tp] = placed[1]
        self._placed[(group_id, tp)] = placed[0]

    def _remove(self, group_id: str, tp: TopicPartitionKey) -> None:
        group = self._offsets.get(group_id)
        if group is None or group.pop(tp, None) is None:
            return
        del self._placed[(group_id, tp)]
        if not group:
            del self._offsets[group_id]

    def _drop_pending(self, group_id: str, tp: TopicPartitionKey) -> None:
        """A tombstone of ``tp``: drop the pending offsets of every open transaction on it."""
        producers = self._open.get(group_id, {}).get(tp)
        if producers is None:
            return
        for producer_id in list(producers):
            by_group = self._pending.get(producer_id, {})
            offsets = by_group.get(group_id, {})
            offsets.pop(tp, None)
            if not offsets:
                by_group.pop(group_id, None)
            if not by_group:
                self._pending.pop(producer_id, None)
            self._close(group_id, tp, producer_id)

    def _close(self, group_id: str, tp: TopicPartitionKey, producer_id: int) -> None:
        open_ = self._open.get(group_id)
        if open_ is None:
            return
        producers = open_.get(tp)
        if producers is not None:
            producers.discard(producer_id)
            if not producers:
                del open_[tp]
        if not open_:
            del self._open[group_id]
