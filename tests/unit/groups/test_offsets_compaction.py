"""A compacted ``__consumer_offsets`` rebuilds exactly the live groups (issue 17, increment 2).

Kafka's group coordinator writes a tombstone for everything it deletes: an offset deleted by
OffsetDelete, the offsets and the group record of a deleted group (DeleteGroups), offsets
expired by ``offsets.retention.minutes`` and the group that expires with them, a KIP-848
member's records when it leaves. Once the log cleaner has removed the old records and then,
past ``delete.retention.ms``, the tombstones themselves, a load must rebuild the groups and
offsets the live coordinator holds: nothing deleted comes back.

Each test drives a coordinator over a one-partition ``__consumer_offsets`` kept by the memory
engine, cleans it with the real cleaner run inline (twice: tombstones get their delete horizon,
then go), loads a fresh coordinator from it and compares. No sockets, no threads.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import CoordinatorRecord
from pydmq.engines.memory import MemoryLog
from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.consumer.api import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.shard import GroupCoordinatorShard
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record, SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig
from pydmq.testing.conformance_compaction import read_all_records, run_cleaning

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
DELETE_RETENTION_MS = 1_000
RETENTION_MS = 7 * 24 * 3600 * 1000  # offsets.retention.minutes, as Kafka's default


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]


@dataclass
class Topics:
    by_name: dict[str, Topic] = field(default_factory=dict)

    def add(self, name: str, n: int) -> None:
        self.by_name[name] = Topic(name, uuid.uuid4(), list(range(n)))

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self.by_name.values()))


class CompactedOffsetsLog:
    """``__consumer_offsets`` as one memory-engine partition: every append is one batch (a
    "segment" of that engine), read back at load across the gaps cleanings leave."""

    num_partitions = 1

    def __init__(self, *, cluster_mode: bool = False) -> None:
        self.cluster_mode = cluster_mode
        self.log = MemoryLog(LogConfig(segment_bytes=1, retention_ms=-1, compact=True))
        self.hold = False  # cluster mode: appends commit at :meth:`settle`
        self.waiting: list[asyncio.Future[int]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        batch = build_batch(
            [SimpleRecord(key, value) for key, value in records],
            base_offset=self.log.log_end_offset,
        )
        self.log.append(batch, list(iter_batch_headers(batch)))
        if not self.hold:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        return future

    def settle(self) -> None:
        """Commit the appends waiting, oldest first."""
        waiting, self.waiting = self.waiting, []
        for future in waiting:
            future.set_result(E.NONE)

    def await_committed(self, partition: int) -> None:
        return None

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, key, value in read_all_records(self.log):
            yield Record(offset, 0, key, value, ())

    def keys(self) -> int:
        """How many records the partition holds."""
        return len(read_all_records(self.log))

    def clean_fully(self, c: GroupCoordinator) -> None:
        """Clean twice, the second time past every tombstone's delete horizon. A commit of
        another group first makes every record of interest lie below the active batch."""
        now = wall_ms()
        commit(c, "filler", {("f", 0): 1})
        run_cleaning(
            self.log, now, delete_retention_ms=DELETE_RETENTION_MS, min_cleanable_dirty_ratio=0.0
        )
        commit(c, "filler", {("f", 0): 2})
        run_cleaning(
            self.log,
            now + DELETE_RETENTION_MS + 1,
            delete_retention_ms=DELETE_RETENTION_MS,
            min_cleanable_dirty_ratio=0.0,
        )


def wall_ms() -> int:
    """The clock the coordinator and the batches' timestamps use."""
    return time.time_ns() // 1_000_000


def make(log: CompactedOffsetsLog, topics: Topics) -> GroupCoordinator:
    """A coordinator of ``log``, loaded (single-node mode) or waiting for its election."""
    config = GroupConfig(
        initial_rebalance_delay_ms=0,
        min_session_timeout_ms=10,
        offsets_retention_ms=RETENTION_MS,
        consumer=ConsumerGroupConfig(session_timeout_ms=60_000),
    )
    coordinator = GroupCoordinator(config, log, topics=topics)
    coordinator.load()
    return coordinator


def snapshot(c: GroupCoordinator) -> dict[str, object]:
    """The groups and committed offsets of the (only) shard, comparable."""

    def read(shard: GroupCoordinatorShard) -> dict[str, object]:
        return {
            "offsets": {g: shard.offsets.all(g) for g in shard.offsets.groups()},
            "classic": {
                g.group_id: (
                    g.state,
                    g.generation_id,
                    g.protocol_type,
                    g.protocol_name,
                    g.leader_id,
                    sorted(g.members),
                )
                for g in shard.classic.groups.values()
            },
            "consumer": {
                g.group_id: (
                    g.group_epoch,
                    g.assignment_epoch,
                    dict(g.subscription_metadata),
                    dict(g.target),
                    {m.member_id: (m.member_epoch, m.assigned) for m in g.members.values()},
                )
                for g in shard.consumer.groups.values()
            },
        }

    return c._runtime.read(0, read)


def reloaded(log: CompactedOffsetsLog, topics: Topics) -> dict[str, object]:
    fresh = make(log, topics)
    try:
        return snapshot(fresh)
    finally:
        fresh.stop()


def commit(c: GroupCoordinator, group: str, offsets: dict[tuple[str, int], int]) -> None:
    request = CommitRequest(group, "", None, -1, -1, {tp: (o, -1, "") for tp, o in offsets.items()})
    assert set(c.commit_offsets(request).values()) == {E.NONE}


def join_request(group: str) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id="",
        group_instance_id=None,
        require_known_member_id=False,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[("range", b"meta")],
    )


def heartbeat(c: GroupCoordinator, group: str, member: str, epoch: int) -> HeartbeatResult:
    joining = epoch == 0
    future = c.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=["t"] if joining else None,
            topic_partitions={} if joining else None,
            client_id="c",
            client_host="/127.0.0.1",
        )
    )
    assert future.done()
    result = future.result()
    assert result.error_code == E.NONE, result
    return result


async def classic_empty_group(c: GroupCoordinator, group: str) -> None:
    """A classic group that had a member (its group record written) and is now Empty."""
    joined = await c.join_group(join_request(group))
    synced = await c.sync_group(group, joined.generation_id, joined.member_id, None, None, None, {})
    assert synced.error_code == E.NONE
    assert c.leave_group(group, [(joined.member_id, None)]) == (E.NONE, [E.NONE])


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


def check_rebuilt(log: CompactedOffsetsLog, c: GroupCoordinator, topics: Topics) -> None:
    before = log.keys()
    log.clean_fully(c)
    assert log.keys() < before
    assert snapshot(c) == reloaded(log, topics)


def test_an_offset_deleted_by_offset_delete_stays_deleted() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        c = make(log, topics)
        for i in range(3):
            commit(c, "simple", {("t", 0): i, ("t", 1): i})
        assert c.delete_offsets("simple", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
        check_rebuilt(log, c, topics)
        assert set(c.offsets.all("simple")) == {("t", 1)}
        c.stop()

    run(scenario())


def test_a_classic_group_deleted_by_delete_groups_never_comes_back() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        c = make(log, topics)
        await classic_empty_group(c, "cg")
        commit(c, "cg", {("t", 0): 5})
        assert c.delete_groups(["cg"]) == {"cg": E.NONE}
        check_rebuilt(log, c, topics)
        assert "cg" not in c.groups and not c.offsets.all("cg")
        c.stop()

    run(scenario())


def test_a_consumer_group_deleted_by_delete_groups_never_comes_back() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        topics.add("t", 4)
        c = make(log, topics)
        a = heartbeat(c, "g", "a", 0)
        heartbeat(c, "g", "b", 0)
        heartbeat(c, "g", "a", a.member_epoch)
        heartbeat(c, "g", "a", -1)
        heartbeat(c, "g", "b", -1)
        commit(c, "g", {("t", 0): 3})  # as an admin client: the group is empty
        assert c.delete_groups(["g"]) == {"g": E.NONE}
        check_rebuilt(log, c, topics)
        assert "g" not in c.consumer_groups and not c.offsets.all("g")
        c.stop()

    run(scenario())


def test_a_kip848_member_that_left_is_not_restored() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        topics.add("t", 4)
        c = make(log, topics)
        a = heartbeat(c, "g", "a", 0)
        heartbeat(c, "g", "b", 0)
        heartbeat(c, "g", "a", a.member_epoch)
        heartbeat(c, "g", "b", -1)
        check_rebuilt(log, c, topics)
        assert set(c.consumer_groups["g"].members) == {"a"}
        c.stop()

    run(scenario())


def test_expired_offsets_and_the_groups_that_expire_with_them_never_come_back() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        topics.add("t", 4)
        c = make(log, topics)
        commit(c, "simple", {("t", 0): 1, ("t", 1): 2})
        await classic_empty_group(c, "cg")
        commit(c, "cg", {("t", 2): 3})
        heartbeat(c, "g", "a", 0)
        heartbeat(c, "g", "a", -1)
        commit(c, "g", {("t", 3): 4})
        await asyncio.sleep(0)
        assert c.expire_offsets(wall_ms() + RETENTION_MS + 60_000) == 4
        await asyncio.sleep(0)
        check_rebuilt(log, c, topics)
        live = snapshot(c)
        assert live["offsets"] == {"filler": c.offsets.all("filler")}
        assert live["classic"] == {"filler": live["classic"]["filler"]}  # type: ignore[index]
        assert live["consumer"] == {}  # the empty KIP-848 group expired with its offsets
        c.stop()

    run(scenario())


def test_an_empty_kip848_group_stays_while_one_of_its_offsets_has_not_expired() -> None:
    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(), Topics()
        topics.add("t", 4)
        c = make(log, topics)
        heartbeat(c, "g", "a", 0)
        heartbeat(c, "g", "a", -1)
        commit(c, "g", {("t", 0): 1})
        expiry = wall_ms() + RETENTION_MS + 60_000
        c.commit_offsets(
            CommitRequest("g", "", None, -1, expiry - wall_ms() + 60_000, {("t", 1): (2, -1, "")})
        )
        assert c.expire_offsets(expiry) == 1  # t-0; t-1 has a longer retention time
        await asyncio.sleep(0)
        assert "g" in c.consumer_groups and set(c.offsets.all("g")) == {("t", 1)}
        c.stop()

    run(scenario())


def test_an_expiring_kip848_group_is_kept_when_a_member_joins_meanwhile() -> None:
    """The deletion of an expired group is keyed by the group: it runs after the heartbeat in
    flight that adds a member, sees it, and writes nothing."""

    async def scenario() -> None:
        log, topics = CompactedOffsetsLog(cluster_mode=True), Topics()
        topics.add("t", 4)
        c = make(log, topics)
        loading = c.on_elected(0, 1)
        assert loading is not None
        await loading
        joined = c.consumer_group_heartbeat(
            HeartbeatRequest(
                "g",
                "a",
                0,
                rebalance_timeout_ms=30_000,
                topic_partitions={},
                subscribed_topic_names=["t"],
            )
        )
        log.settle()
        await joined
        left = c.consumer_group_heartbeat(HeartbeatRequest("g", "a", -1))
        log.settle()
        await left
        assert not c.consumer_groups["g"].members
        log.hold = True
        rejoined = c.consumer_group_heartbeat(
            HeartbeatRequest(
                "g",
                "b",
                0,
                rebalance_timeout_ms=30_000,
                topic_partitions={},
                subscribed_topic_names=["t"],
            )
        )
        c.expire_offsets(wall_ms())  # the group has no offsets: it would go, but for "b"
        for _ in range(5):
            log.settle()
            await asyncio.sleep(0)
        assert (await rejoined).error_code == E.NONE
        assert set(c.consumer_groups["g"].members) == {"b"}
        c.stop()

    run(scenario())
