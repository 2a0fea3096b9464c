"""Committed offsets: the in-memory view of ``__consumer_offsets`` (group -> partition -> offset).

The cache changes only after the records are appended (commit, delete, expire) or while
replaying the topic at start-up, so it always equals what a replay would rebuild. An offset
commit whose append is not committed yet (cluster mode: acks=-1 waits for the ISR) stays
pending, invisible to OffsetFetch, until the append commits; a failed append drops it, as
Kafka's pending offset commits do. Otherwise a coordinator cut off from its followers would
show offsets that its successor never sees, and committed offsets would go backwards.
Metadata strings are kept exactly as committed (control characters and non-ASCII included).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydmq.groups.records import OffsetCommitKey, OffsetCommitValue

__all__ = ["OffsetAndMetadata", "OffsetStore", "TopicPartitionKey"]

TopicPartitionKey = tuple[str, int]
# Appends a group's records; returns None once they are committed, else a future of the
# commit's error code (0 when committed).
Appender = Callable[[str, list[tuple[bytes, bytes | None]]], "asyncio.Future[int] | None"]


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


class OffsetStore:
    """Owned by the event loop; ``append`` writes records to the group's partition."""

    def __init__(self, append: Appender) -> None:
        self._append = append
        self._offsets: dict[str, dict[TopicPartitionKey, OffsetAndMetadata]] = {}
        # Commits appended but not committed yet: group -> partition -> sequence of the
        # latest one. A pending commit is applied only if it is still the latest when its
        # append commits (an older one never overwrites a newer one).
        self._pending: dict[str, dict[TopicPartitionKey, int]] = {}
        self._commit_seq = 0

    # -- reads -----------------------------------------------------------------------
    def groups(self) -> list[str]:
        return list(self._offsets)

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._offsets.get(group_id))

    def get(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self._offsets.get(group_id, {}).get((topic, partition))

    def all(self, group_id: str) -> dict[TopicPartitionKey, OffsetAndMetadata]:
        return dict(self._offsets.get(group_id, {}))

    # -- writes ----------------------------------------------------------------------
    def commit(self, group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata]) -> None:
        if not offsets:
            return
        records: list[tuple[bytes, bytes | None]] = [
            (OffsetCommitKey(group_id, t, p).encode(), o.to_value().encode())
            for (t, p), o in offsets.items()
        ]
        waiter = self._append(group_id, records)
        if waiter is None:
            self._apply(group_id, offsets)
            return
        self._commit_seq += 1
        seq = self._commit_seq
        pending = self._pending.setdefault(group_id, {})
        for tp in offsets:
            pending[tp] = seq

        def settled(future: asyncio.Future[int]) -> None:
            committed = (
                not future.cancelled() and future.exception() is None and not future.result()
            )
            waiting = self._pending.get(group_id, {})
            latest = {tp: o for tp, o in offsets.items() if waiting.get(tp) == seq}
            for tp in latest:
                del waiting[tp]
            if not waiting:
                self._pending.pop(group_id, None)
            if committed:
                self._apply(group_id, latest)

        waiter.add_done_callback(settled)

    def _apply(self, group_id: str, offsets: dict[TopicPartitionKey, OffsetAndMetadata]) -> None:
        if offsets:
            self._offsets.setdefault(group_id, {}).update(offsets)

    def pending(self, group_id: str) -> set[TopicPartitionKey]:
        """Partitions of ``group_id`` with an offset commit whose append is not committed."""
        return set(self._pending.get(group_id, {}))

    def delete(self, group_id: str, partitions: Iterable[TopicPartitionKey]) -> int:
        current = self._offsets.get(group_id)
        if not current:
            return 0
        doomed = [tp for tp in partitions if tp in current]
        if not doomed:
            return 0
        self._append(
            group_id, [(OffsetCommitKey(group_id, t, p).encode(), None) for t, p in doomed]
        )
        for tp in doomed:
            del current[tp]
        if not current:
            del self._offsets[group_id]
        return len(doomed)

    def delete_group(self, group_id: str) -> int:
        return self.delete(group_id, list(self._offsets.get(group_id, {})))

    def expire(self, group_id: str, now_ms: int, retention_ms: int, base_ms: int | None) -> int:
        """Tombstone offsets whose expiry passed: the explicit expire timestamp if any, else
        ``base_ms`` (when the group became Empty) or the commit time, plus retention."""
        current = self._offsets.get(group_id, {})
        doomed = []
        for tp, o in current.items():
            deadline = (
                o.expire_timestamp
                if o.expire_timestamp >= 0
                else (o.commit_timestamp if base_ms is None else base_ms) + retention_ms
            )
            if deadline <= now_ms:
                doomed.append(tp)
        return self.delete(group_id, doomed)

    # -- ownership -------------------------------------------------------------------
    def adopt(self, loaded: OffsetStore) -> None:
        """Take over the offsets replayed into ``loaded`` (a partition finished loading)."""
        self._offsets.update(loaded._offsets)

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> int:
        """Forget (no tombstones) the offsets of the groups ``owned_elsewhere`` selects: their
        partition's leadership moved away. Returns how many groups were forgotten."""
        doomed = [g for g in self._offsets if owned_elsewhere(g)]
        for group_id in doomed:
            del self._offsets[group_id]
        for group_id in [g for g in self._pending if owned_elsewhere(g)]:
            del self._pending[group_id]  # their appends settle as NOT_LEADER: never applied
        return len(doomed)

    # -- replay ----------------------------------------------------------------------
    def replay_commit(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        tp = (key.topic, key.partition)
        if value is None:
            group = self._offsets.get(key.group)
            if group is not None:
                group.pop(tp, None)
                if not group:
                    del self._offsets[key.group]
            return
        self._offsets.setdefault(key.group, {})[tp] = OffsetAndMetadata.from_value(value)
