"""A share group's offsets, wherever its share-partitions' state lives (KIP-932): what the
group coordinator's DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets and DeleteGroups do, as Kafka's group coordinator does it, through the
share coordinators (:class:`~pydmq.shares.persister.SharePersister`):

- **describe**: ReadShareGroupStateSummary of each share-partition (start offset, leader
  epoch, offsets whose delivery completed), and the partition's high watermark for the lag
  (this node's when it leads the partition, else ListOffsets to its leader).
- **alter**: InitializeShareGroupState at the next state epoch: the share-partition restarts at
  the offset with nothing in flight, and a write of its partition leader's older state is
  fenced (FENCED_STATE_EPOCH), so the leader reloads it.
- **delete**: DeleteShareGroupState.

After an alter or a delete this node drops its own copy of the share-partition when it leads
the partition and nothing is acquired there (:meth:`SharePartitionManager.invalidate`); other
leaders reload at the next share session opened on it, or when fenced.

Which share-partitions a group has: a single node's share coordinator holds every state; in a
cluster, every partition of the topics named (or of every topic) is asked, in parallel. Owned
by the event loop.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.shares.generated_records import ShareSnapshotValue
from pydmq.shares.manager import SharePartitionManager
from pydmq.shares.persister import RemoteStates, SharePersister
from pydmq.shares.state_log import StateKey
from pydmq.storage.api import TopicPartition

__all__ = ["PartitionOffsets", "ShareGroupOffsets", "TopicRegistry"]

_LATEST = -1
_LIST_OFFSETS_VERSION = 7
_REQUEST_TIMEOUT_S = 10.0


class _Partition(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def leader(self) -> int: ...


class _Topic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def internal(self) -> bool: ...

    @property
    def partitions(self) -> Sequence[_Partition]: ...


class TopicRegistry(Protocol):
    """The node's topics, as its metadata has them."""

    def __iter__(self) -> Iterator[Any]: ...

    def by_id(self, topic_id: uuid.UUID) -> Any: ...


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """A share-partition as DescribeShareGroupOffsets answers it."""

    start_offset: int
    leader_epoch: int
    lag: int  # -1: unknown


class ShareGroupOffsets:
    """A share group's offsets over the share coordinators (see the module)."""

    def __init__(
        self,
        node_id: int,
        persister: SharePersister,
        partitions: SharePartitionManager,
        replica_manager: ReplicaManager,
        topics: Callable[[], Iterable[_Topic]],
        by_id: Callable[[uuid.UUID], _Topic | None],
        remote: RemoteStates | None,
    ) -> None:
        self.node_id = node_id
        self.persister = persister
        self.partitions = partitions
        self.replica_manager = replica_manager
        self._topics = topics
        self._by_id = by_id
        self._remote = remote

    def candidates(
        self, group_id: str, topic_ids: Iterable[uuid.UUID] | None = None
    ) -> list[StateKey]:
        """The share-partitions ``group_id`` may have state on (of ``topic_ids`` when given):
        exactly those with state on a single node; every partition of those topics (or of
        every topic) in a cluster."""
        wanted = None if topic_ids is None else set(topic_ids)
        coordinator = self.persister.coordinator
        if coordinator.owns_all:
            return sorted(
                key
                for key, _ in coordinator.snapshots()
                if key[0] == group_id and (wanted is None or key[1] in wanted)
            )
        keys = []
        for topic in self._topics():
            if topic.internal or (wanted is not None and topic.topic_id not in wanted):
                continue
            keys += [(group_id, topic.topic_id, p.index) for p in topic.partitions]
        return sorted(keys)

    async def states(self, keys: Iterable[StateKey]) -> dict[StateKey, ShareSnapshotValue]:
        """The summary of each of ``keys`` that has state (unknown or unreachable ones are
        left out)."""
        keys = list(keys)
        answers = await asyncio.gather(*(self.persister.summary(k) for k in keys))
        return {
            key: state
            for key, (code, state) in zip(keys, answers, strict=True)
            if not code and state is not None
        }

    async def describe(
        self, group_id: str, keys: Iterable[StateKey]
    ) -> dict[StateKey, PartitionOffsets]:
        """Start offset, leader epoch and lag of ``keys`` that have state."""
        states = await self.states(keys)
        watermarks = await self._high_watermarks(states)
        out = {}
        for key, state in states.items():
            hwm = watermarks.get(key, -1)
            done = max(0, state.delivery_complete_count)
            lag = -1 if hwm < 0 else max(0, hwm - state.start_offset - done)
            out[key] = PartitionOffsets(state.start_offset, state.leader_epoch, lag)
        return out

    async def alter(self, key: StateKey, start_offset: int) -> int:
        """The share-partition of ``key`` restarts at ``start_offset``; the error code."""
        code, state = await self.persister.summary(key)
        if code:
            return code
        epoch = 0 if state is None else state.state_epoch + 1
        code = await self.persister.initialize(key, epoch, start_offset)
        if not code:
            self.partitions.invalidate(key)
        return code

    async def delete(self, keys: Iterable[StateKey]) -> dict[StateKey, int]:
        """Forget the state of ``keys``; the error code of each."""
        keys = list(keys)
        for key in keys:
            self.partitions.invalidate(key)
        codes = await asyncio.gather(*(self.persister.delete(k) for k in keys))
        return dict(zip(keys, codes, strict=True))

    async def _high_watermarks(self, keys: Iterable[StateKey]) -> dict[StateKey, int]:
        """The high watermark of each key's partition: this node's when it leads it, else
        asked of its leader (ListOffsets, latest); -1 when it cannot be had."""
        out: dict[StateKey, int] = {}
        remote: dict[int, list[tuple[StateKey, str, int]]] = {}
        for key in keys:
            topic = self._by_id(key[1])
            if topic is None:
                continue
            led, _ = self.replica_manager.leader_partition(TopicPartition(topic.name, key[2]))
            if led is not None:
                out[key] = led.high_watermark
                continue
            leader = next((p.leader for p in topic.partitions if p.index == key[2]), -1)
            if leader >= 0 and leader != self.node_id and self._remote is not None:
                remote.setdefault(leader, []).append((key, topic.name, key[2]))
        asked = await asyncio.gather(*(self._ask(n, wanted) for n, wanted in remote.items()))
        for answer in asked:
            out.update(answer)
        return out

    async def _ask(
        self, node_id: int, wanted: list[tuple[StateKey, str, int]]
    ) -> dict[StateKey, int]:
        assert self._remote is not None
        by_topic: dict[str, list[int]] = {}
        for _, name, index in wanted:
            by_topic.setdefault(name, []).append(index)
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=name,
                    partitions=[
                        ListOffsetsPartition(
                            partition_index=i, current_leader_epoch=-1, timestamp=_LATEST
                        )
                        for i in indexes
                    ],
                )
                for name, indexes in by_topic.items()
            ],
        )
        try:
            response: ListOffsetsResponse = await self._remote.request(
                node_id, 2, _LIST_OFFSETS_VERSION, request, _REQUEST_TIMEOUT_S
            )
        except (ConnectionError, OSError, TimeoutError):
            return {}
        found = {
            (t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }
        return {key: found[(name, i)] for key, name, i in wanted if (name, i) in found}
