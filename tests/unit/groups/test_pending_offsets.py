"""Offset commits stay invisible until their append is committed (Kafka's pending commits).

Found by the chaos harness: a coordinator cut off from its followers applied commits it
could not replicate; OffsetFetch showed them, then its successor did not have them and the
group's committed offsets went backwards. The offsets of a shard change only when the runtime
replays a committed write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

from pydmq.groups.api import CommitRequest, GroupConfig
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import Record


class HeldLog:
    """One ``__consumer_offsets`` partition led here whose appends commit only when the test
    settles their futures (``hold``), or at once."""

    cluster_mode = True
    num_partitions = 1

    def __init__(self, hold: bool = True) -> None:
        self.hold = hold
        self.records: list[tuple[bytes, bytes | None]] = []
        self.futures: list[asyncio.Future[int]] = []
        self.log_end: list[asyncio.Future[int]] = []  # await_committed's, settled by tests

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]]
    ) -> asyncio.Future[int] | None:
        self.records.extend(records)
        if not self.hold:
            return None
        self.futures.append(asyncio.get_running_loop().create_future())
        return self.futures[-1]

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for i, (k, v) in enumerate(self.records):
            yield Record(i, 0, k, v, ())

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        self.log_end.append(asyncio.get_running_loop().create_future())
        return self.log_end[-1]


async def _elected(log: HeldLog) -> GroupCoordinator:
    c = GroupCoordinator(GroupConfig(), log)
    task = c.on_elected(0, 1)
    assert task is not None
    await task
    return c


def _commit(c: GroupCoordinator, offsets: dict[tuple[str, int], int]) -> None:
    wanted: dict[tuple[str, int], tuple[int, int, str | None]] = {
        tp: (offset, -1, "") for tp, offset in offsets.items()
    }
    assert set(c.commit_offsets(CommitRequest("g", "", None, -1, -1, wanted)).values()) == {0}


def _offset(c: GroupCoordinator, partition: int) -> int | None:
    got = c.offsets.get("g", "t", partition)
    return None if got is None else got.offset


async def _settled() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_commit_applied_only_once_its_append_commits() -> None:
    async def scenario() -> None:
        log = HeldLog()
        c = await _elected(log)
        _commit(c, {("t", 0): 10})
        assert _offset(c, 0) is None
        assert c._runtime.pending_writes(0) == 1
        log.futures[0].set_result(ErrorCode.NONE)
        await _settled()
        assert _offset(c, 0) == 10
        assert c._runtime.pending_writes(0) == 0

    asyncio.run(scenario())


def test_failed_append_is_never_applied() -> None:
    async def scenario() -> None:
        log = HeldLog()
        c = await _elected(log)
        _commit(c, {("t", 0): 5})
        log.futures[0].set_result(ErrorCode.NONE)
        await _settled()
        _commit(c, {("t", 0): 9})
        log.futures[1].set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        await _settled()
        assert _offset(c, 0) == 5
        assert c._runtime.pending_writes(0) == 0

    asyncio.run(scenario())


def test_a_timed_out_commit_shows_once_the_log_holding_it_is_committed() -> None:
    """A commit whose replication timed out stays in the leader's log and may commit later:
    the shard is reloaded once the log is committed, so OffsetFetch then shows it, and never
    before (the partition answers COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""

    async def scenario() -> None:
        log = HeldLog()
        c = await _elected(log)
        _commit(c, {("t", 0): 5})
        log.futures[0].set_result(ErrorCode.NONE)
        await _settled()
        _commit(c, {("t", 0): 9})
        log.futures[1].set_result(ErrorCode.REQUEST_TIMED_OUT)
        await _settled()
        assert c.fetch_offsets("g", None)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        log.log_end[0].set_result(ErrorCode.NONE)  # the follower caught up
        await _settled()
        assert c.fetch_offsets("g", None)[0] == ErrorCode.NONE
        assert _offset(c, 0) == 9

    asyncio.run(scenario())


def test_an_older_commit_settling_late_never_overwrites_a_newer_one() -> None:
    async def scenario() -> None:
        log = HeldLog()
        c = await _elected(log)
        _commit(c, {("t", 0): 1, ("t", 1): 100})
        _commit(c, {("t", 0): 2})
        log.futures[1].set_result(ErrorCode.NONE)
        await _settled()
        log.futures[0].set_result(ErrorCode.NONE)
        await _settled()
        assert (_offset(c, 0), _offset(c, 1)) == (2, 100)

    asyncio.run(scenario())


def test_unloaded_group_drops_its_pending_commits() -> None:
    async def scenario() -> None:
        log = HeldLog()
        c = await _elected(log)
        _commit(c, {("t", 0): 7})
        c.on_resigned(0, 2)
        log.futures[0].set_result(ErrorCode.NONE)
        await _settled()
        assert _offset(c, 0) is None

    asyncio.run(scenario())


def test_committed_at_once_is_applied_at_once() -> None:
    async def scenario() -> None:
        c = await _elected(HeldLog(hold=False))
        _commit(c, {("t", 0): 3})
        assert _offset(c, 0) == 3

    asyncio.run(scenario())
