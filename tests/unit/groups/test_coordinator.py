"""GroupCoordinator driven directly: state machine, Kafka's error codes, timers, offsets.

An in-memory OffsetsLog records appends; timeouts are tens of milliseconds on the real loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pytest

from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.classic.group import GroupState, JoinResult
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

T = TypeVar("T")


class MemoryLog:
    """``__consumer_offsets`` as one partition in memory; appends are committed at once."""

    num_partitions = 1

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def partition_for(self, group_id: str) -> int:
        return 0

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.records.extend(records)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for i, (k, v) in enumerate(self.records):
            yield Record(i, 0, k, v, ())


def config(**kw: int) -> GroupConfig:
    base: dict[str, int] = {
        "initial_rebalance_delay_ms": 0,
        "min_session_timeout_ms": 10,
        "max_session_timeout_ms": 60_000,
    }
    base.update(kw)
    return GroupConfig(**base)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


def jreq(
    member_id: str = "",
    *,
    group: str = "g",
    v4: bool = False,
    instance: str | None = None,
    session: int = 10_000,
    rebalance: int = 10_000,
    protocol_type: str = "consumer",
    protocols: list[tuple[str, bytes]] | None = None,
    client: str = "c",
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        require_known_member_id=v4,
        client_id=client,
        client_host="/127.0.0.1",
        rebalance_timeout_ms=rebalance,
        session_timeout_ms=session,
        protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", b"meta")],
    )


async def stable_single(c: GroupCoordinator, **kw: Any) -> JoinResult:
    joined = await c.join_group(jreq(**kw))
    assert joined.error_code == E.NONE
    synced = await c.sync_group(
        "g",
        joined.generation_id,
        joined.member_id,
        kw.get("instance"),
        None,
        None,
        {joined.member_id: b"assignment-1"},
    )
    assert synced.error_code == E.NONE and synced.assignment == b"assignment-1"
    return joined


def test_v0_to_v3_join_in_one_round_trip() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        result = await c.join_group(jreq(v4=False))
        assert result.error_code == E.NONE
        assert result.generation_id == 1
        assert result.leader_id == result.member_id
        assert result.member_id.startswith("c-")
        assert [m[0] for m in result.members] == [result.member_id]
        assert result.protocol_name == "range"
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE

    run(scenario())


def test_member_id_required_only_from_v4_and_pending_expiry() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        first = await c.join_group(jreq(v4=True, session=50))
        assert first.error_code == E.MEMBER_ID_REQUIRED
        assert first.member_id
        second = await c.join_group(jreq(first.member_id, v4=True, session=50))
        assert second.error_code == E.NONE and second.member_id == first.member_id
        # a pending member that never comes back expires after its session timeout
        pending = await c.join_group(jreq(v4=True, session=30, group="h"))
        assert pending.error_code == E.MEMBER_ID_REQUIRED
        await asyncio.sleep(0.1)
        late = await c.join_group(jreq(pending.member_id, v4=True, session=30, group="h"))
        assert late.error_code == E.UNKNOWN_MEMBER_ID

    run(scenario())


def test_join_errors() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        assert (await c.join_group(jreq(group=""))).error_code == E.INVALID_GROUP_ID
        assert (await c.join_group(jreq(session=5))).error_code == E.INVALID_SESSION_TIMEOUT
        assert (await c.join_group(jreq(session=70_000))).error_code == E.INVALID_SESSION_TIMEOUT
        assert (await c.join_group(jreq("nobody"))).error_code == E.UNKNOWN_MEMBER_ID
        assert (await c.join_group(jreq(protocols=[]))).error_code == (
            E.INCONSISTENT_GROUP_PROTOCOL
        )
        assert "g" not in c.groups  # failed joins leave no group behind
        await stable_single(c)
        other = await c.join_group(jreq(protocol_type="connect"))
        assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        other = await c.join_group(jreq(protocols=[("roundrobin", b"")]))
        assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        small = GroupCoordinator(config(max_size=1), MemoryLog())
        await stable_single(small)
        full = await small.join_group(jreq())
        assert full.error_code == E.GROUP_MAX_SIZE_REACHED

    run(scenario())


def test_two_members_rebalance_and_heartbeat_errors() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        a = await stable_single(c)
        assert c.groups["g"].state is GroupState.STABLE
        assert c.heartbeat("g", a.generation_id, a.member_id, None) == E.NONE
        assert c.heartbeat("g", a.generation_id + 5, a.member_id, None) == E.ILLEGAL_GENERATION
        assert c.heartbeat("g", a.generation_id, "ghost", None) == E.UNKNOWN_MEMBER_ID
        assert c.heartbeat("nope", 1, a.member_id, None) == E.UNKNOWN_MEMBER_ID
        b_task = asyncio.ensure_future(c.join_group(jreq(client="b")))
        await asyncio.sleep(0.01)
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert c.heartbeat("g", a.generation_id, a.member_id, None) == E.REBALANCE_IN_PROGRESS
        a2 = await c.join_group(jreq(a.member_id))
        b = await b_task
        assert a2.generation_id == b.generation_id == a.generation_id + 1
        assert a2.leader_id == a.member_id  # the leader rejoined and stays leader
        assert len(a2.members) == 2 and b.members == []
        # non-leader sync waits; its (ignored) assignments do not complete the rebalance
        b_sync = asyncio.ensure_future(
            c.sync_group("g", b.generation_id, b.member_id, None, None, None, {b.member_id: b"x"})
        )
        await asyncio.sleep(0.01)
        assert not b_sync.done()
        # commits during CompletingRebalance are refused
        commit = c.commit_offsets(
            CommitRequest("g", a.member_id, None, a2.generation_id, -1, {("t", 0): (1, -1, "")})
        )
        assert commit == {("t", 0): E.REBALANCE_IN_PROGRESS}
        a_sync = await c.sync_group(
            "g",
            a2.generation_id,
            a.member_id,
            None,
            "consumer",
            "range",
            {a.member_id: b"A", b.member_id: b"B"},
        )
        assert a_sync.assignment == b"A" and a_sync.protocol_name == "range"
        assert (await b_sync).assignment == b"B"
        assert c.groups["g"].state is GroupState.STABLE
        wrong = await c.sync_group("g", a2.generation_id, a.member_id, None, "x", None, {})
        assert wrong.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        stale = await c.sync_group("g", a.generation_id, a.member_id, None, None, None, {})
        assert stale.error_code == E.ILLEGAL_GENERATION
        # leave: the other member rebalances alone
        top, errors = c.leave_group("g", [(b.member_id, None), ("ghost", None)])
        assert (top, errors) == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID])
        assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
        a3 = await c.join_group(jreq(a.member_id))
        assert a3.generation_id == a2.generation_id + 1 and len(a3.members) == 1

    run(scenario())


def test_session_expiry_triggers_rebalance() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        a_task = asyncio.ensure_future(c.join_group(jreq(session=150, client="a")))
        b_task = asyncio.ensure_future(c.join_group(jreq(session=150, client="b")))
        a, b = await a_task, await b_task
        assert a.generation_id == b.generation_id == 1
        leader, other = (a, b) if a.leader_id == a.member_id else (b, a)
        other_sync = asyncio.ensure_future(
            c.sync_group("g", 1, other.member_id, None, None, None, {})
        )
        await c.sync_group("g", 1, leader.member_id, None, None, None, {})
        await other_sync
        # only the leader heartbeats: the other member expires and the group rebalances
        code = E.NONE
        for _ in range(40):
            await asyncio.sleep(0.02)
            code = c.heartbeat("g", 1, leader.member_id, None)
            if code != E.NONE:
                break
        assert code == E.REBALANCE_IN_PROGRESS
        assert not c.groups["g"].has(other.member_id)
        again = await c.join_group(jreq(leader.member_id, session=150))
        assert again.generation_id == 2 and [m[0] for m in again.members] == [leader.member_id]

    run(scenario())


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        a_task = asyncio.ensure_future(c.join_group(jreq(client="a", rebalance=100)))
        b_task = asyncio.ensure_future(c.join_group(jreq(client="b", rebalance=100)))
        a, b = await a_task, await b_task
        leader = a if a.leader_id == a.member_id else b
        other = b if leader is a else a
        other_sync = asyncio.ensure_future(
            c.sync_group("g", 1, other.member_id, None, None, None, {})
        )
        await c.sync_group("g", 1, leader.member_id, None, None, None, {})
        await other_sync
        c_result = await c.join_group(jreq(client="c", rebalance=100))  # waits ~100 ms
        again = c.groups["g"]
        assert c_result.error_code == E.NONE and c_result.generation_id == 2
        assert set(again.members) == {c_result.member_id}

    run(scenario())


def test_initial_rebalance_delay_collects_joiners() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(initial_rebalance_delay_ms=100), MemoryLog())
        first = asyncio.ensure_future(c.join_group(jreq(client="a")))
        await asyncio.sleep(0.03)
        second = asyncio.ensure_future(c.join_group(jreq(client="b")))
        a, b = await first, await second
        assert a.generation_id == b.generation_id == 1
        assert len((a if a.members else b).members) == 2

    run(scenario())


def test_static_member_rejoin_without_rebalance_and_fencing() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        old = await stable_single(c, instance="i-1", v4=True)
        generation = old.generation_id
        again = await c.join_group(jreq(instance="i-1", v4=True))
        assert again.error_code == E.NONE
        assert again.generation_id == generation  # no rebalance
        assert again.member_id != old.member_id
        assert again.leader_id != again.member_id  # no trivial reassignment by the leader
        assert c.groups["g"].state is GroupState.STABLE
        synced = await c.sync_group("g", generation, again.member_id, "i-1", None, None, {})
        assert synced.error_code == E.NONE and synced.assignment == b"assignment-1"
        assert c.heartbeat("g", generation, old.member_id, "i-1") == E.FENCED_INSTANCE_ID
        assert c.heartbeat("g", generation, again.member_id, "i-1") == E.NONE
        assert c.heartbeat("g", generation, again.member_id, "i-2") == E.UNKNOWN_MEMBER_ID
        fenced = c.commit_offsets(
            CommitRequest("g", old.member_id, "i-1", generation, -1, {("t", 0): (5, -1, "")})
        )
        assert fenced == {("t", 0): E.FENCED_INSTANCE_ID}
        # a changed subscription (another protocol) does rebalance
        moved = await c.join_group(jreq(instance="i-1", protocols=[("range", b"other")]))
        assert moved.error_code == E.NONE  # raw bytes differ but not parseable: rebalance
        assert moved.generation_id == generation + 1
        # static leave by instance id
        top, errors = c.leave_group("g", [("", "i-1")])
        assert (top, errors) == (E.NONE, [E.NONE])
        assert c.groups["g"].state is GroupState.EMPTY

    run(scenario())


def _subscription(*topics: str, owned: bytes = b"") -> bytes:
    out = bytearray(b"\x00\x01") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return bytes(out + b"\xff\xff\xff\xff" + owned)


def test_static_rejoin_compares_subscribed_topics_not_bytes() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        old = await stable_single(c, instance="s", protocols=[("range", _subscription("t"))])
        rejoin = await c.join_group(
            jreq(instance="s", protocols=[("range", _subscription("t", owned=b"\x00"))])
        )
        assert rejoin.generation_id == old.generation_id
        changed = await c.join_group(jreq(instance="s", protocols=[("range", _subscription("u"))]))
        assert changed.generation_id == old.generation_id + 1

    run(scenario())


def test_offsets_commit_fetch_and_validation() -> None:
    metadata = "\x00\x01\n\t\x7f é 漢字 🎉"

    async def scenario() -> None:
        log = MemoryLog()
        c = GroupCoordinator(config(offset_metadata_max_bytes=64), log)
        simple = c.commit_offsets(
            CommitRequest(
                "simple",
                "",
                None,
                -1,
                -1,
                {("t", 0): (42, 7, metadata), ("t", 1): (3, -1, None), ("t", 2): (1, -1, "x" * 65)},
            )
        )
        assert simple == {
            ("t", 0): E.NONE,
            ("t", 1): E.NONE,
            ("t", 2): E.OFFSET_METADATA_TOO_LARGE,
        }
        error, rows = c.fetch_offsets("simple", [("t", [0, 1, 2])])
        assert error == E.NONE
        got = {(t, p): o for t, p, o in rows}
        zero = got[("t", 0)]
        assert zero is not None
        assert (zero.offset, zero.leader_epoch, zero.metadata) == (42, 7, metadata)
        one = got[("t", 1)]
        assert one is not None and one.metadata == ""
        assert got[("t", 2)] is None
        assert [(t, p) for t, p, _ in c.fetch_offsets("simple", None)[1]] == [("t", 0), ("t", 1)]
        # group commits
        a = await stable_single(c)
        ok = c.commit_offsets(
            CommitRequest("g", a.member_id, None, a.generation_id, -1, {("t", 0): (9, -1, "")})
        )
        assert ok == {("t", 0): E.NONE}
        assert c.commit_offsets(
            CommitRequest("g", a.member_id, None, a.generation_id + 1, -1, {("t", 0): (9, -1, "")})
        ) == {("t", 0): E.ILLEGAL_GENERATION}
        assert c.commit_offsets(CommitRequest("g", "", None, -1, -1, {("t", 0): (9, -1, "")})) == {
            ("t", 0): E.UNKNOWN_MEMBER_ID
        }
        assert c.commit_offsets(
            CommitRequest("g", "ghost", None, a.generation_id, -1, {("t", 0): (9, -1, "")})
        ) == {("t", 0): E.UNKNOWN_MEMBER_ID}
        assert c.commit_offsets(
            CommitRequest("new", "m", None, 3, -1, {("t", 0): (9, -1, "")})
        ) == {("t", 0): E.ILLEGAL_GENERATION}
        assert c.commit_offsets(CommitRequest("", "", None, -1, -1, {("t", 0): (9, -1, "")})) == {
            ("t", 0): E.INVALID_GROUP_ID
        }
        # replay into a fresh coordinator rebuilds offsets and groups
        fresh = GroupCoordinator(config(), log)
        fresh.load()
        fresh_zero = fresh.offsets.get("simple", "t", 0)
        assert fresh_zero is not None and fresh_zero.metadata == metadata
        assert fresh.groups["g"].state is GroupState.STABLE  # members restored, as Kafka's
        assert set(fresh.groups["g"].members) == {a.member_id}
        assert fresh.groups["g"].generation_id == a.generation_id
        assert fresh.groups["g"].protocol_type == "consumer"

    run(scenario())


def test_delete_groups_and_offsets() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        c = GroupCoordinator(config(), log)
        c.commit_offsets(CommitRequest("simple", "", None, -1, -1, {("t", 0): (1, -1, "")}))
        a = await stable_single(c, protocols=[("range", _subscription("t"))])
        assert c.delete_groups(["g", "simple", "missing", ""]) == {
            "g": E.NON_EMPTY_GROUP,
            "simple": E.NONE,
            "missing": E.GROUP_ID_NOT_FOUND,
            "": E.INVALID_GROUP_ID,
        }
        assert c.fetch_offsets("simple", None) == (E.NONE, [])
        c.commit_offsets(
            CommitRequest(
                "g",
                a.member_id,
                None,
                a.generation_id,
                -1,
                {("t", 0): (1, -1, ""), ("u", 0): (2, -1, "")},
            )
        )
        assert c.delete_offsets("missing", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
        top, results = c.delete_offsets("g", [("u", 0), ("t", 0)])
        assert top == E.NONE
        assert results == {("u", 0): E.NONE, ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC}
        assert c.offsets.get("g", "u", 0) is None
        fresh = GroupCoordinator(config(), log)
        fresh.load()
        assert "simple" not in fresh.groups
        assert fresh.offsets.get("g", "u", 0) is None
        assert fresh.offsets.get("g", "t", 0) is not None

    run(scenario())


def test_offsets_retention_expires_empty_groups() -> None:
    async def scenario() -> None:
        log = MemoryLog()
        c = GroupCoordinator(config(offsets_retention_ms=1000), log)
        c.commit_offsets(CommitRequest("simple", "", None, -1, -1, {("t", 0): (1, -1, "")}))
        a = await stable_single(c)
        c.commit_offsets(
            CommitRequest("g", a.member_id, None, a.generation_id, -1, {("t", 0): (1, -1, "")})
        )
        far = c._clock() + 10_000
        assert c.expire_offsets(far) == 1  # the stable group keeps its offsets
        assert "simple" not in c.groups and "g" in c.groups
        fresh = GroupCoordinator(config(), log)
        fresh.load()
        assert fresh.offsets.get("simple", "t", 0) is None
        assert fresh.offsets.get("g", "t", 0) is not None

    run(scenario())


def test_retention_timer_expires_offsets_and_empty_groups() -> None:
    """The retention check runs as a timer of each partition's shard once started."""

    async def scenario() -> None:
        log = MemoryLog()
        c = GroupCoordinator(config(offsets_retention_ms=1, retention_check_interval_ms=10), log)
        c.load()
        c.start()
        c.commit_offsets(CommitRequest("simple", "", None, -1, -1, {("t", 0): (1, -1, "")}))
        assert "simple" in c.groups
        for _ in range(500):  # bounded: at most 5 s
            if "simple" not in c.groups:
                break
            await asyncio.sleep(0.01)
        assert "simple" not in c.groups
        assert c.fetch_offsets("simple", None) == (E.NONE, [])
        c.stop()
        fresh = GroupCoordinator(config(), log)
        fresh.load()
        assert fresh.offsets.get("simple", "t", 0) is None and "simple" not in fresh.groups

    run(scenario())


def test_classic_groups_live_in_their_partitions_shard() -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        await stable_single(c)
        assert c.has_classic_group("g") and not c.has_classic_group("missing")
        assert list(c.groups) == ["g"]
        c.stop()  # the shards are dropped: so are their groups
        assert c.groups == {}

    run(scenario())


@pytest.mark.parametrize("version_has_batch", [True])
def test_list_and_describe(version_has_batch: bool) -> None:
    async def scenario() -> None:
        c = GroupCoordinator(config(), MemoryLog())
        a = await stable_single(c)
        error, summary = c.describe_group("g")
        assert error == E.NONE and summary.state == "Stable" and summary.protocol == "range"
        assert summary.members[0].member_id == a.member_id
        assert summary.members[0].assignment == b"assignment-1"
        assert c.describe_group("missing")[1].state == "Dead"
        assert ("g", "consumer", "Stable") in c.list_groups()

    run(scenario())
