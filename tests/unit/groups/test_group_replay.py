"""Groups change by replaying their records (issue 16, part 3).

KIP-848 consumer groups change only by replay:

- The group a series of live operations built equals, after every operation, the group a
  fresh load rebuilds from the records those operations wrote (one replay code).
- A write that fails (refused at append, or not committed) leaves the group as it was, and the
  next operation on the group computes from that state.
- Unloading a shard drops its consumer groups and their timers; a new election reloads them.

Classic groups change by the replay of their records where their state is in records (the
transient rebalance state stays in memory, as in Kafka): the members get a SyncGroup's
assignments when its record is committed, a deleted group goes when its tombstone is, and a
load restores groups with the same replay.

No sockets: ``__consumer_offsets`` is an in-memory partition log.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import CoordinatorResult, CoordinatorWriteError
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.classic.group import ClassicGroup, JoinResult
from pydmq.groups.consumer.api import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from pydmq.groups.consumer.group import ConsumerGroup
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.shard import GroupCoordinatorShard
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]


@dataclass
class Topics:
    by_name: dict[str, Topic] = field(default_factory=dict)

    def add(self, name: str, n: int) -> Topic:
        self.by_name[name] = Topic(name, uuid.uuid4(), list(range(n)))
        return self.by_name[name]

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self.by_name.values()))


class OneLog:
    """``__consumer_offsets`` as one partition in memory. ``cluster_mode``: led only once
    elected; with ``hold``, appends wait for :meth:`settle`; ``refuse`` refuses appends."""

    num_partitions = 1

    def __init__(self, *, cluster_mode: bool = False) -> None:
        self.cluster_mode = cluster_mode
        self.records: list[tuple[bytes, bytes | None]] = []
        self.hold = False
        self.refuse: int | None = None
        self.waiting: list[tuple[int, asyncio.Future[int]]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]]
    ) -> asyncio.Future[int] | None:
        if self.refuse is not None:
            raise CoordinatorWriteError(self.refuse)
        start = len(self.records)
        self.records.extend(records)
        if not self.hold:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiting.append((start, future))
        return future

    def settle(self, code: int = E.NONE) -> None:
        """Commit (or fail, truncating them) the appends waiting, oldest first."""
        for start, future in self.waiting:
            if code:
                del self.records[start:]
            future.set_result(code)
        self.waiting.clear()

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(list(self.records)):
            yield Record(offset, 0, key, value, ())


def shard_timer(c: GroupCoordinator, group_id: str) -> CoordinatorTimer[GroupCoordinatorShard]:
    """The timers of the shard of ``group_id``'s partition (which must be loaded here)."""
    partition = c._log.partition_for(group_id)
    return c._runtime.read(partition, lambda shard: shard.timer)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 20))


async def settle_callbacks() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make(log: OneLog, topics: Topics, *, owns_all: bool | None = None) -> GroupCoordinator:
    config = GroupConfig(
        initial_rebalance_delay_ms=0,
        min_session_timeout_ms=10,
        consumer=ConsumerGroupConfig(session_timeout_ms=60_000),
    )
    coordinator = GroupCoordinator(config, log, topics=topics, owns_all_partitions=owns_all)
    coordinator.load()
    return coordinator


def beat(
    c: GroupCoordinator,
    member: str,
    epoch: int,
    *,
    group: str = "g",
    topics: list[str] | None = None,
    owned: dict[uuid.UUID, list[int]] | None = None,
    **kw: Any,
) -> asyncio.Future[HeartbeatResult]:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        if topics is None and "subscribed_topic_regex" not in kw:
            topics = ["t"]
        owned = owned or {}
    return c.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            subscribed_topic_names=topics,
            topic_partitions=owned,
            client_id=f"client-{member}",
            client_host="/127.0.0.1",
            **kw,
        )
    )


def hb(c: GroupCoordinator, member: str, epoch: int, **kw: Any) -> HeartbeatResult:
    future = beat(c, member, epoch, **kw)
    assert future.done()
    return future.result()


def state(group: ConsumerGroup) -> tuple[object, ...]:
    """Everything a consumer group holds, comparable."""
    members = {
        m.member_id: (
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.subscribed_topic_names,
            m.subscribed_topic_regex,
            m.compiled_regex is not None,
            m.server_assignor,
            m.member_epoch,
            m.previous_member_epoch,
            m.state,
            m.assigned,
            m.pending_revocation,
            m.left_static,
        )
        for m in group.members.values()
    }
    return (
        group.group_epoch,
        group.assignment_epoch,
        group.state,
        dict(group.subscription_metadata),
        dict(group.target),
        dict(group.owners),
        dict(group.static_members),
        members,
    )


def classic_state(group: ClassicGroup) -> tuple[object, ...]:
    """Everything a classic group's record holds (the members' metadata of the selected
    protocol only: a load restores that one), comparable; not the state timestamp (the
    record's is when the group entered CompletingRebalance, as Kafka's)."""
    protocol = group.protocol_name
    members = {
        m.member_id: (
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.protocol_type,
            None if protocol is None else m.metadata_for(protocol),
            m.assignment,
        )
        for m in group.members.values()
    }
    return (
        group.state,
        group.generation_id,
        group.protocol_type,
        protocol,
        group.leader_id,
        dict(group.static_members),
        members,
    )


def states(c: GroupCoordinator) -> dict[object, tuple[object, ...]]:
    """The consumer groups by id and the classic groups by ("classic", id)."""
    found: dict[object, tuple[object, ...]] = {
        group_id: state(group) for group_id, group in c.consumer_groups.items()
    }
    for group_id, classic in c.groups.items():
        found["classic", group_id] = classic_state(classic)
    return found


def reloaded(log: OneLog, topics: Topics) -> dict[object, tuple[object, ...]]:
    fresh = make(log, topics, owns_all=True)
    try:
        return states(fresh)
    finally:
        fresh.stop()


class Member:
    """A well-behaved client: acknowledges whatever the coordinator takes away."""

    def __init__(self, c: GroupCoordinator, member_id: str, group: str = "g", **join: Any) -> None:
        self.c, self.id, self.group, self.join = c, member_id, group, join
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}

    def beat(self, **extra: Any) -> HeartbeatResult:
        kw = {**(self.join if self.epoch == 0 else {}), **extra}
        r = hb(self.c, self.id, self.epoch, group=self.group, owned=self.owned, **kw)
        assert r.error_code == E.NONE, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = {t: sorted(ps) for t, ps in r.assignment.items()}
        return r


def expire_session(c: GroupCoordinator, group: str, member: str) -> None:
    """Fire ``member``'s session timer now (its operation, as the timer would run it)."""
    timer = shard_timer(c, group)
    assert timer is not None

    def expire(shard: GroupCoordinatorShard) -> CoordinatorResult[Any, None]:
        return shard.consumer.expire_session(group, member)

    timer.schedule(("consumer-session", group, member), 0, expire, write_key=group)


def test_the_live_groups_equal_the_groups_a_load_rebuilds_after_every_operation() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 6)
        topics.add("orders.a", 2)
        log = OneLog()
        c = make(log, topics)
        c.start()
        steps = 0

        def check() -> None:
            nonlocal steps
            steps += 1
            assert states(c) == reloaded(log, topics), f"after step {steps}"

        a = Member(c, "a", topics=["t"])
        b = Member(c, "b", topics=["t"], rack_id="r1")
        s = Member(c, "s", topics=["t"], instance_id="i")
        x = Member(c, "x", group="other", subscribed_topic_regex="orders\\..*")
        for _ in range(4):
            for m in (a, b, s):
                m.beat()
                check()
        x.beat()
        check()
        # a static member leaves for a while, then comes back under the same member id
        assert hb(c, "s", -2, instance_id="i").member_epoch == -2
        check()
        s.epoch, s.owned = 0, {}
        s.beat()
        check()
        # ... and again, replaced by a new member id with the same instance id
        assert hb(c, "s", -2, instance_id="i").error_code == E.NONE
        check()
        s2 = Member(c, "s2", topics=["t"], instance_id="i")
        s2.beat()
        check()
        # a subscription change, a new topic matching a regex, a leave, an expiry
        a.beat(topics=["t", "orders.a"])
        check()
        topics.add("orders.b", 3)
        x.beat()
        check()
        assert hb(c, "b", -1).member_epoch == -1
        check()
        for m in (a, s2, a, s2):
            m.beat()
            check()
        expire_session(c, "g", "s2")
        await settle_callbacks()
        assert "s2" not in c.consumer_groups["g"].members
        check()
        c.commit_offsets(CommitRequest("other", "", None, -1, -1, {("t", 0): (5, -1, "")}, 9))
        assert hb(c, "x", -1, group="other").error_code == E.NONE
        check()
        assert c.delete_groups(["other"]) == {"other": E.NONE}
        assert "other" not in c.consumer_groups
        check()
        await classic_scenario(c, check)
        c.stop()

    run(scenario())


def test_a_refused_write_leaves_the_group_as_it_was() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        log = OneLog()
        c = make(log, topics)
        a = Member(c, "a", topics=["t"])
        a.beat()
        a.beat()
        before = states(c)
        epoch = c.consumer_groups["g"].group_epoch
        log.refuse = E.NOT_ENOUGH_REPLICAS
        assert hb(c, "b", 0).error_code == E.COORDINATOR_NOT_AVAILABLE  # a join
        assert hb(c, "a", a.epoch, topics=["t", "u"], owned=a.owned).error_code == (
            E.COORDINATOR_NOT_AVAILABLE
        )
        assert hb(c, "a", -1).error_code == E.COORDINATOR_NOT_AVAILABLE  # a leave
        assert c.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
        assert states(c) == before
        timer = shard_timer(c, "g")
        assert timer is not None  # the member that did not leave keeps its session timer
        assert timer.is_scheduled(("consumer-session", "g", "a"))
        log.refuse = None
        assert hb(c, "b", 0).error_code == E.NONE
        assert c.consumer_groups["g"].group_epoch == epoch + 1
        c.stop()

    run(scenario())


def test_an_uncommitted_write_that_fails_leaves_the_group_as_it_was() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        log = OneLog(cluster_mode=True)
        c = make(log, topics)
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        first = beat(c, "a", 0)
        await settle_callbacks()
        log.settle()
        await settle_callbacks()
        assert first.result().error_code == E.NONE
        before = states(c)
        epoch = c.consumer_groups["g"].group_epoch
        log.hold = True
        joining = beat(c, "b", 0)
        following = beat(c, "c", 0)  # waits for b's write: it must not build on it
        await settle_callbacks()
        assert not joining.done() and not following.done()
        assert states(c) == before  # nothing is applied before the commit
        log.settle(E.NOT_ENOUGH_REPLICAS)
        await settle_callbacks()
        assert joining.result().error_code == E.COORDINATOR_NOT_AVAILABLE
        assert "b" not in c.consumer_groups["g"].members
        assert not following.done()  # its write is appended, computed from the state before b
        log.settle()
        await settle_callbacks()
        joined = following.result()
        assert joined.error_code == E.NONE
        group = c.consumer_groups["g"]
        assert set(group.members) == {"a", "c"}
        assert group.group_epoch == epoch + 1
        assert states(c) == reloaded(log, topics)
        c.stop()

    run(scenario())


def test_unloading_a_shard_drops_its_consumer_groups_and_their_timers() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        log = OneLog(cluster_mode=True)
        c = make(log, topics)
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        for member, group in (("a", "g"), ("b", "g"), ("c", "h")):
            assert hb(c, member, 0, group=group).error_code == E.NONE
        timer = shard_timer(c, "g")
        assert timer is not None
        assert timer.is_scheduled(("consumer-session", "g", "a"))
        assert timer.is_scheduled(("consumer-session", "h", "c"))
        before = states(c)
        c.on_resigned(0, 2)
        await settle_callbacks()
        assert c.consumer_groups == {}
        assert len(timer) == 0
        assert hb(c, "a", 1).error_code == E.NOT_COORDINATOR
        task = c.on_elected(0, 3)
        assert task is not None
        await task
        assert states(c) == before
        reloaded_timer = shard_timer(c, "g")
        assert reloaded_timer is not None and reloaded_timer is not timer
        assert reloaded_timer.is_scheduled(("consumer-session", "g", "b"))
        c.stop()

    run(scenario())


def classic_join(
    member_id: str, client: str, *, group: str = "cg", instance: str | None = None
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        require_known_member_id=False,
        client_id=client,
        client_host="/127.0.0.1",
        rebalance_timeout_ms=20_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[("range", f"range-{client}".encode()), ("roundrobin", b"rr")],
    )


async def rebalance(c: GroupCoordinator, *joins: JoinRequest) -> list[JoinResult]:
    """Join concurrently (new members first: a known member's rejoin alone would complete
    the rebalance without them), then sync every member (the leader hands out
    assignments)."""
    joined = await asyncio.gather(*(c.join_group(r) for r in joins))
    assert all(j.error_code == E.NONE for j in joined), joined
    generation, leader = joined[0].generation_id, joined[0].leader_id
    assignments = {j.member_id: f"{j.member_id}@{generation}".encode() for j in joined}
    synced = await asyncio.gather(
        *(
            c.sync_group(
                r.group_id,
                generation,
                j.member_id,
                r.group_instance_id,
                None,
                None,
                assignments if j.member_id == leader else {},
            )
            for r, j in zip(joins, joined, strict=True)
        )
    )
    assert [s.assignment for s in synced] == [assignments[j.member_id] for j in joined]
    return list(joined)


async def classic_scenario(c: GroupCoordinator, check: Any) -> None:
    """Classic rebalances, heartbeats, a static member's restart, leaves and a deletion,
    with ``check()`` after each (at rest: a rebalance's record is written by its sync)."""
    (a,) = await rebalance(c, classic_join("", "a"))
    check()
    b, a = await rebalance(c, classic_join("", "b"), classic_join(a.member_id, "a"))
    check()
    for member in (a, b):
        assert c.heartbeat("cg", member.generation_id, member.member_id, None) == E.NONE
    check()
    s, a, b = await rebalance(
        c,
        classic_join("", "s", instance="i"),
        classic_join(a.member_id, "a"),
        classic_join(b.member_id, "b"),
    )
    check()
    # the static member restarts: a new member id, no rebalance, the record is rewritten
    restarted = await c.join_group(classic_join("", "s", instance="i"))
    assert restarted.error_code == E.NONE and restarted.generation_id == s.generation_id
    check()
    assert c.leave_group("cg", [(b.member_id, None)]) == (E.NONE, [E.NONE])
    a, s = await rebalance(
        c, classic_join(a.member_id, "a"), classic_join(restarted.member_id, "s", instance="i")
    )
    check()
    assert c.leave_group("cg", [(a.member_id, None), ("", "i")]) == (E.NONE, [E.NONE, E.NONE])
    check()
    assert c.groups["cg"].state.value == "Empty"
    assert c.delete_groups(["cg"]) == {"cg": E.NONE}
    assert "cg" not in c.groups
    check()


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


async def elected(log: OneLog) -> GroupCoordinator:
    c = make(log, Topics())
    task = c.on_elected(0, 1)
    assert task is not None
    await task
    return c


def test_a_sync_group_assignment_reaches_the_members_when_its_record_is_committed() -> None:
    async def scenario() -> None:
        log = OneLog(cluster_mode=True)
        c = await elected(log)
        joined = await c.join_group(join_request("cg"))
        await settle_callbacks()
        log.settle()
        log.hold = True
        member = joined.member_id
        sync = asyncio.ensure_future(
            c.sync_group("cg", joined.generation_id, member, None, None, None, {member: b"a"})
        )
        await settle_callbacks()
        assert not sync.done()
        assert c.groups["cg"].members[member].assignment == b""  # not before the commit
        log.settle()
        result = await sync
        assert result.error_code == E.NONE and result.assignment == b"a"
        assert c.groups["cg"].members[member].assignment == b"a"
        c.stop()

    run(scenario())


def test_a_deleted_classic_group_goes_when_its_tombstone_is_committed() -> None:
    async def scenario() -> None:
        log = OneLog(cluster_mode=True)
        c = await elected(log)
        joined = await c.join_group(join_request("cg"))
        assert c.leave_group("cg", [(joined.member_id, None)]) == (E.NONE, [E.NONE])
        await settle_callbacks()
        log.settle()
        assert c.groups["cg"].state.value == "Empty"
        log.hold = True
        assert c.delete_groups(["cg"]) == {"cg": E.NONE}
        assert "cg" in c.groups  # until the tombstone is committed
        log.settle()
        await settle_callbacks()
        assert "cg" not in c.groups
        c.stop()

    run(scenario())


def test_a_load_restores_classic_groups_with_their_members() -> None:
    async def scenario() -> None:
        log = OneLog()
        c = make(log, Topics())
        joined = await c.join_group(join_request("cg"))
        member = joined.member_id
        synced = await c.sync_group("cg", joined.generation_id, member, None, None, None, {})
        assert synced.error_code == E.NONE
        c.commit_offsets(CommitRequest("simple", "", None, -1, -1, {("t", 0): (1, -1, "")}, 9))
        c.stop()
        fresh = make(log, Topics())
        restored = fresh.groups["cg"]
        assert restored.state.value == "Stable" and list(restored.members) == [member]
        assert (restored.generation_id, restored.protocol_type, restored.protocol_name) == (
            joined.generation_id,
            "consumer",
            "range",
        )
        assert restored.leader_id == member
        assert restored.members[member].metadata_for("range") == b"meta"
        assert fresh.groups["simple"].generation_id == 0  # offsets only: an Empty group
        timer = shard_timer(fresh, "cg")
        assert not timer.is_scheduled(("heartbeat", "cg", member))  # until started
        fresh.start()
        await settle_callbacks()
        assert timer.is_scheduled(("heartbeat", "cg", member))  # its session runs
        # the member carries on at its generation: no rebalance
        assert fresh.heartbeat("cg", joined.generation_id, member, None) == E.NONE
        resynced = await fresh.sync_group("cg", joined.generation_id, member, None, None, None, {})
        assert resynced.error_code == E.NONE
        fresh.stop()

    run(scenario())


def test_a_classic_join_waits_for_a_pending_heartbeat_and_then_refuses_to_convert() -> None:
    """An empty consumer group whose uncommitted heartbeat adds a member is not converted:
    the join decides once that write is committed, and no id is both group types."""

    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        log = OneLog(cluster_mode=True)
        c = make(log, topics)
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        assert hb(c, "a", 0).error_code == E.NONE
        assert hb(c, "a", -1).member_epoch == -1  # the group is empty now, committed
        assert not c.consumer_groups["g"].members
        log.hold = True
        joining = beat(c, "b", 0)
        await settle_callbacks()
        classic = asyncio.ensure_future(c.join_group(join_request("g")))
        await settle_callbacks()
        assert not classic.done()  # keyed by the group: after the heartbeat's write
        log.settle()
        await settle_callbacks()
        assert joining.result().error_code == E.NONE
        assert (await classic).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert "g" not in c.groups
        assert set(c.consumer_groups["g"].members) == {"b"}
        assert states(c) == reloaded(log, topics)
        c.stop()

    run(scenario())


def test_a_classic_join_converts_an_empty_consumer_group_once_its_tombstones_commit() -> None:
    """The conversion is a write keyed by the group: the join runs once the tombstones are
    committed; a heartbeat scheduled meanwhile runs before the join's retry, takes the id
    for a consumer group, and the join is refused (never both group types)."""

    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        log = OneLog(cluster_mode=True)
        c = make(log, topics)
        task = c.on_elected(0, 1)
        assert task is not None
        await task
        for group in ("g", "h"):
            assert hb(c, "a", 0, group=group).error_code == E.NONE
            assert hb(c, "a", -1, group=group).member_epoch == -1
        log.hold = True
        classic = asyncio.ensure_future(c.join_group(join_request("g")))
        await settle_callbacks()
        assert not classic.done() and "g" in c.consumer_groups  # tombstones in flight
        assert "g" not in c.groups
        log.settle()
        await settle_callbacks()
        assert "g" not in c.consumer_groups
        joined = await classic
        assert joined.error_code == E.NONE and "g" in c.groups
        # the other group: a heartbeat waits behind the conversion and wins the id
        classic = asyncio.ensure_future(c.join_group(join_request("h")))
        await settle_callbacks()
        following = beat(c, "b", 0, group="h")
        log.settle()  # the conversion
        await settle_callbacks()
        assert not following.done()  # its write (a new consumer group) is held
        log.settle()
        await settle_callbacks()
        assert following.result().error_code == E.NONE
        assert (await classic).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        assert "h" not in c.groups and set(c.consumer_groups["h"].members) == {"b"}
        c.stop()

    run(scenario())


def test_a_join_while_a_classic_group_tombstone_is_in_flight_joins_a_new_group() -> None:
    """DeleteGroups answered NONE deleted the group: a JoinGroup that lands while its
    tombstone is in flight runs after it, in a new group."""

    async def scenario() -> None:
        log = OneLog(cluster_mode=True)
        c = await elected(log)
        joined = await c.join_group(join_request("cg"))
        member = joined.member_id
        synced = await c.sync_group("cg", joined.generation_id, member, None, None, None, {})
        assert synced.error_code == E.NONE
        assert c.leave_group("cg", [(member, None)]) == (E.NONE, [E.NONE])
        commit = CommitRequest("cg", "", None, -1, -1, {("t", 0): (7, -1, "")}, 9)
        assert c.commit_offsets(commit) == {("t", 0): E.NONE}
        assert c.groups["cg"].generation_id == 2
        log.hold = True
        assert c.delete_groups(["cg"]) == {"cg": E.NONE}
        join = asyncio.ensure_future(c.join_group(join_request("cg")))
        await settle_callbacks()
        assert not join.done()  # keyed by the group: after the tombstone
        log.settle()
        rejoined = await join
        assert rejoined.error_code == E.NONE
        assert rejoined.generation_id == 1  # a new group, not generation 3 of the old one
        assert c.offsets.all("cg") == {}
        log.hold = False
        resynced = await c.sync_group(
            "cg", 1, rejoined.member_id, None, None, None, {rejoined.member_id: b"x"}
        )
        assert resynced.error_code == E.NONE and resynced.assignment == b"x"
        assert states(c) == reloaded(log, Topics())
        c.stop()

    run(scenario())


def test_a_group_loaded_over_its_maximum_size_rebalances() -> None:
    """As Kafka: ``group.max.size`` lowered since, the loaded group rebalances at once; the
    members rejoining within the size stay, the others are left out."""

    async def scenario() -> None:
        log = OneLog()
        c = make(log, Topics())
        members = await rebalance(
            c, classic_join("", "a"), classic_join("", "b"), classic_join("", "c")
        )
        c.stop()
        config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2)
        fresh = GroupCoordinator(config, log, topics=Topics())
        fresh.load()
        assert fresh.groups["cg"].state.value == "Stable"
        fresh.start()
        await settle_callbacks()
        assert fresh.groups["cg"].state.value == "PreparingRebalance"
        rejoined = await asyncio.gather(
            fresh.join_group(classic_join(members[0].member_id, "a")),
            fresh.join_group(classic_join(members[1].member_id, "b")),
            fresh.join_group(classic_join(members[2].member_id, "c")),
        )
        codes = sorted(r.error_code for r in rejoined)
        assert codes == [E.NONE, E.NONE, E.GROUP_MAX_SIZE_REACHED]
        assert len(fresh.groups["cg"].members) == 2
        fresh.stop()

    run(scenario())
