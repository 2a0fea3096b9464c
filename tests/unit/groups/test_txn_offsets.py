"""Transactional offsets on the group coordinator (TxnOffsetCommit, KIP-98/KIP-447).

The offsets of a TxnOffsetCommit are written as a transactional batch and kept pending per
producer id: invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable) until
``complete_transaction`` appends the producer's COMMIT marker (ABORT drops them). A load of
the same batches gives the live state. Deletion and expiry follow Kafka 4: a tombstone drops
the pending offsets of its partition; an open transaction keeps its group and offsets.
One ``__consumer_offsets`` partition in memory, no sockets.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import (
    CoordinatorBatch,
    CoordinatorRecord,
    CoordinatorWriteError,
    TransactionResult,
)
from pydmq.groups.api import CommitRequest, GroupConfig
from pydmq.groups.consumer.api import HeartbeatRequest
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.shard import GroupCoordinatorShard
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
PID = 4000
TP = ("t", 0)


class TxnOffsetsLog:
    """One ``__consumer_offsets`` partition of batches, led here; with ``hold`` an append
    commits only when the test settles it; ``refuse`` refuses the next appends."""

    cluster_mode = True
    num_partitions = 1

    def __init__(self) -> None:
        self.batches: list[CoordinatorBatch] = []
        self.hold = False
        self.refuse: int | None = None
        self.waiting: list[asyncio.Future[int]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def _stored(self, batch: CoordinatorBatch) -> asyncio.Future[int] | None:
        if self.refuse is not None:
            raise CoordinatorWriteError(self.refuse)
        self.batches.append(batch)
        if not self.hold:
            return None
        self.waiting.append(asyncio.get_running_loop().create_future())
        return self.waiting[-1]

    @staticmethod
    def _records(records: Sequence[CoordinatorRecord]) -> list[Record]:
        return [Record(i, 0, k, v, ()) for i, (k, v) in enumerate(records)]

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        return self._stored(CoordinatorBatch(-1, -1, False, self._records(records)))

    def append_transactional(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_id: int,
        producer_epoch: int,
    ) -> asyncio.Future[int] | None:
        batch = CoordinatorBatch(producer_id, producer_epoch, True, self._records(records))
        return self._stored(batch)

    def append_end_txn_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        transaction_version: int,
    ) -> asyncio.Future[int] | None:
        return self._stored(CoordinatorBatch(producer_id, producer_epoch, True, (), result))

    def replay_batches(self, partition: int) -> Iterator[CoordinatorBatch]:
        yield from list(self.batches)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        raise AssertionError("a transactional shard is loaded batch by batch")

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        return None


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


async def elected(log: TxnOffsetsLog, config: GroupConfig | None = None) -> GroupCoordinator:
    c = GroupCoordinator(config or GroupConfig(), log)
    task = c.on_elected(0, 1)
    assert task is not None
    await task
    return c


def commit(
    c: GroupCoordinator,
    offsets: dict[tuple[str, int], int],
    producer: tuple[int, int] | None = (PID, 0),
    group: str = "g",
    generation: int = -1,
) -> dict[tuple[str, int], int]:
    wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {
        tp: (offset, -1, "m") for tp, offset in offsets.items()
    }
    request = CommitRequest(group, "", None, generation, -1, wanted, 5, producer=producer)
    return c.commit_offsets(request)


def offset(c: GroupCoordinator, tp: tuple[str, int] = TP, group: str = "g") -> int | None:
    got = c.offsets.get(group, *tp)
    return None if got is None else got.offset


def state(c: GroupCoordinator) -> tuple[object, ...]:
    shard: GroupCoordinatorShard = c._runtime.read(0, lambda s: s)
    offsets = shard.offsets
    return (
        {g: offsets.all(g) for g in sorted(offsets.groups())},
        {g: sorted(offsets.pending_partitions(g)) for g in sorted(offsets.groups())},
        {pid: offsets.pending(pid) for pid in (PID, PID + 1)},
        sorted(shard.classic.groups),
    )


async def complete(c: GroupCoordinator, committed: bool, producer: int = PID) -> int:
    return await c.complete_transaction(0, producer, 0, 3, committed)


def test_pending_offsets_are_invisible_until_the_commit_marker() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = await elected(log)
        assert commit(c, {TP: 5}, producer=None) == {TP: E.NONE}
        assert commit(c, {TP: 10, ("t", 1): 20}) == {TP: E.NONE, ("t", 1): E.NONE}
        assert [(b.producer_id, b.is_transactional) for b in log.batches] == [
            (-1, False),
            (PID, True),
        ]
        assert offset(c) == 5 and offset(c, ("t", 1)) is None
        rows = [(TP[0], [0, 1])]
        assert c.fetch_offsets("g", rows)[1] == [
            ("t", 0, c.offsets.get("g", "t", 0)),
            ("t", 1, None),
        ]
        stable = c.fetch_offsets("g", rows, require_stable=True)[1]
        assert [r[2] for r in stable] == [E.UNSTABLE_OFFSET_COMMIT, E.UNSTABLE_OFFSET_COMMIT]
        all_stable = c.fetch_offsets("g", None, require_stable=True)[1]
        assert all_stable == [("t", 0, E.UNSTABLE_OFFSET_COMMIT)]  # committed ones, as Kafka
        assert await complete(c, committed=True) == E.NONE
        assert log.batches[-1].end_txn is TransactionResult.COMMIT
        assert (offset(c), offset(c, ("t", 1))) == (10, 20)
        assert c.fetch_offsets("g", rows, require_stable=True)[1][0][2] == c.offsets.get(
            "g", "t", 0
        )

    run(scenario())


def test_abort_drops_the_pending_offsets() -> None:
    async def scenario() -> None:
        c = await elected(TxnOffsetsLog())
        commit(c, {TP: 5}, producer=None)
        commit(c, {TP: 10})
        assert await complete(c, committed=False) == E.NONE
        assert offset(c) == 5
        assert c.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][2] is not None
        assert await complete(c, committed=True) == E.NONE  # nothing pending: a marker only
        assert offset(c) == 5

    run(scenario())


def test_the_later_commit_in_the_log_wins() -> None:
    """A plain commit appended after the transactional one stays when the transaction
    commits; a transactional commit appended after a plain one replaces it."""

    async def scenario() -> None:
        c = await elected(TxnOffsetsLog())
        commit(c, {TP: 10})
        commit(c, {TP: 7}, producer=None)
        await complete(c, committed=True)
        assert offset(c) == 7
        commit(c, {TP: 12})
        await complete(c, committed=True)
        assert offset(c) == 12

    run(scenario())


def test_two_producers_end_independently() -> None:
    async def scenario() -> None:
        c = await elected(TxnOffsetsLog())
        commit(c, {TP: 10}, producer=(PID, 0))
        commit(c, {("t", 1): 11}, producer=(PID + 1, 2))
        await complete(c, committed=False, producer=PID)
        assert c.fetch_offsets("g", [("t", [0, 1])], require_stable=True)[1][1][2] == (
            E.UNSTABLE_OFFSET_COMMIT
        )
        await c.complete_transaction(0, PID + 1, 2, 3, True)
        assert (offset(c), offset(c, ("t", 1))) == (None, 11)

    run(scenario())


def test_a_reload_gives_the_live_state() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        live = await elected(log)
        commit(live, {TP: 1}, producer=None)
        commit(live, {TP: 10, ("t", 1): 11})
        commit(live, {("t", 1): 3}, producer=None)
        await complete(live, committed=True)
        commit(live, {TP: 20}, group="h")
        await complete(live, committed=False)
        commit(live, {("t", 2): 30}, producer=(PID + 1, 0))  # stays open
        commit(live, {("t", 3): 40}, producer=(PID + 1, 0), group="only-pending")
        assert live.delete_offsets("g", [("t", 2)])[0] == E.NONE
        commit(live, {("t", 4): 50}, producer=(PID + 1, 0))
        reloaded = await elected(log)
        assert state(reloaded) == state(live)
        assert (offset(reloaded), offset(reloaded, ("t", 1))) == (10, 3)
        assert offset(reloaded, group="h") is None
        assert "only-pending" in reloaded.groups  # an Empty classic group, as live
        await reloaded.complete_transaction(0, PID + 1, 0, 3, True)
        await live.complete_transaction(0, PID + 1, 0, 3, True)
        assert state(reloaded) == state(live)
        assert offset(reloaded, ("t", 2)) is None  # its tombstone dropped it
        assert offset(reloaded, ("t", 4)) == 50

    run(scenario())


def test_the_marker_waits_for_the_offsets_it_ends() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = await elected(log)
        log.hold = True
        commit(c, {TP: 10})
        ended = asyncio.ensure_future(complete(c, committed=True))
        await asyncio.sleep(0)
        log.waiting[1].set_result(E.NONE)  # the marker commits before the offsets' batch
        await asyncio.sleep(0)
        assert not ended.done() and offset(c) is None
        log.waiting[0].set_result(E.NONE)
        assert await ended == E.NONE
        assert offset(c) == 10

    run(scenario())


def test_complete_transaction_errors() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = await elected(log)
        commit(c, {TP: 10})
        log.refuse = E.INVALID_PRODUCER_EPOCH
        assert await complete(c, committed=True) == E.INVALID_PRODUCER_EPOCH
        log.refuse = None
        assert offset(c) is None and c.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][
            2
        ] == (E.UNSTABLE_OFFSET_COMMIT)
        log.hold = True
        ended = asyncio.ensure_future(complete(c, committed=True))
        await asyncio.sleep(0)
        log.waiting[0].set_result(E.NOT_LEADER_OR_FOLLOWER)  # leadership moved
        assert await ended == E.NOT_LEADER_OR_FOLLOWER
        c.on_resigned(0, 5)
        await asyncio.sleep(0)
        # not led here: the transaction coordinator is told to find the leader again
        assert await complete(c, committed=True) == E.NOT_LEADER_OR_FOLLOWER

    run(scenario())


def test_a_fenced_producer_epoch_is_refused_by_the_log() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = await elected(log)
        log.refuse = E.INVALID_PRODUCER_EPOCH
        assert commit(c, {TP: 10}) == {TP: E.INVALID_PRODUCER_EPOCH}
        assert "g" not in c.groups  # the simple group the commit created is forgotten

    run(scenario())


def test_deleting_the_group_or_its_offsets_drops_pending_offsets() -> None:
    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = await elected(log)
        commit(c, {TP: 10, ("t", 1): 11})
        assert c.delete_offsets("g", [("t", 1)]) == (E.NONE, {("t", 1): E.NONE})
        assert log.batches[-1].records[0].value is None  # a tombstone of the pending offset
        assert c.delete_groups(["g"]) == {"g": E.NONE}  # an Empty group: Kafka deletes it
        assert "g" not in c.groups
        await complete(c, committed=True)
        assert (offset(c), offset(c, ("t", 1))) == (None, None)
        assert c.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][2] is None

    run(scenario())


def test_expiry_keeps_offsets_and_groups_of_open_transactions() -> None:
    async def scenario() -> None:
        now = [1_000_000]
        config = GroupConfig(offsets_retention_ms=1000)
        log = TxnOffsetsLog()
        c = GroupCoordinator(config, log, clock=lambda: now[0])
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        commit(c, {TP: 5}, producer=None)  # plain, then pending on the same partition
        commit(c, {TP: 10})
        commit(c, {TP: 7}, producer=(PID + 1, 0), group="only-pending")
        now[0] += 10_000
        c.expire_offsets()
        await asyncio.sleep(0)
        assert offset(c) == 5 and {"g", "only-pending"} <= set(c.groups)
        await complete(c, committed=False)
        await c.complete_transaction(0, PID + 1, 0, 3, False)
        c.expire_offsets()
        await asyncio.sleep(0)
        assert offset(c) is None
        assert "g" not in c.groups and "only-pending" not in c.groups

    run(scenario())


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]
    internal: bool = False


class Topics:
    """The topic view of KIP-848 groups: one topic ``t`` of two partitions."""

    def __init__(self) -> None:
        self.t = Topic("t", uuid.uuid4(), [0, 1])

    def get(self, name: str) -> Topic | None:
        return self.t if name == "t" else None

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self.t if topic_id == self.t.topic_id else None

    def __iter__(self) -> Iterator[Topic]:
        return iter([self.t])


def test_member_epoch_checks_of_a_consumer_group() -> None:
    """KIP-848: a TxnOffsetCommit carries the member epoch as its generation, at any
    version (no UNSUPPORTED_VERSION below OffsetCommit v9); a stale epoch is answered
    ILLEGAL_GENERATION, a newer one FENCED_MEMBER_EPOCH."""

    async def scenario() -> None:
        log = TxnOffsetsLog()
        c = GroupCoordinator(GroupConfig(), log, topics=Topics())
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        joined = c.consumer_group_heartbeat(
            HeartbeatRequest(
                group_id="g",
                member_id="a",
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=["t"],
                topic_partitions={},
            )
        ).result()
        assert joined.error_code == E.NONE
        epoch = joined.member_epoch

        def txn(member: str, member_epoch: int) -> int:
            wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {TP: (5, -1, "")}
            request = CommitRequest("g", member, None, member_epoch, -1, wanted, 3, (PID, 0))
            return c.commit_offsets(request)[TP]

        assert txn("a", epoch - 1) == E.ILLEGAL_GENERATION
        assert txn("a", epoch + 1) == E.FENCED_MEMBER_EPOCH
        assert txn("b", epoch) == E.UNKNOWN_MEMBER_ID
        assert txn("a", epoch) == E.NONE
        assert offset(c) is None
        assert await complete(c, committed=True) == E.NONE
        assert offset(c) == 5
        assert "g" not in c.groups  # a consumer group, never also a classic one
        reloaded = await elected(log)
        assert "g" not in reloaded.groups and offset(reloaded) == 5

    run(scenario())
