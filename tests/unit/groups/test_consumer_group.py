"""KIP-848 consumer groups driven directly: reconciliation invariants, error codes, offsets,
records replayed after a restart. Topic metadata is a fake registry; records go to memory."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.consumer.api import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from pydmq.groups.consumer.group import ConsumerGroupState, MemberState
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

T = TypeVar("T")


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[int]
    internal: bool = False


@dataclass
class Topics:
    by_name: dict[str, Topic] = field(default_factory=dict)

    def add(self, name: str, n: int) -> Topic:
        t = Topic(name, uuid.uuid4(), list(range(n)))
        self.by_name[name] = t
        return t

    def get(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return next((t for t in self.by_name.values() if t.topic_id == topic_id), None)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self.by_name.values()))


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


def make(log: MemoryLog | None = None, topics: Topics | None = None, **kw: Any) -> GroupCoordinator:
    cfg = GroupConfig(
        initial_rebalance_delay_ms=0, min_session_timeout_ms=10, consumer=ConsumerGroupConfig(**kw)
    )
    c = GroupCoordinator(cfg, log or MemoryLog(), topics=topics or Topics())
    c.load()
    return c


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 20))


def hb(
    c: GroupCoordinator,
    member: str,
    epoch: int,
    *,
    group: str = "g",
    topics: list[str] | None = None,
    owned: dict[uuid.UUID, list[int]] | None = None,
    **kw: Any,
) -> HeartbeatResult:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        if topics is None and "subscribed_topic_regex" not in kw:
            topics = ["t"]
        if owned is None:
            owned = {}
    return c.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            subscribed_topic_names=topics,
            topic_partitions=owned,
            **kw,
        )
    ).result()


def parts(result: HeartbeatResult) -> set[int]:
    assert result.assignment is not None
    return {p for ps in result.assignment.values() for p in ps}


class Client:
    """A well-behaved client: acknowledges (revokes) whatever the coordinator takes away."""

    def __init__(self, c: GroupCoordinator, member_id: str, topics: list[str]) -> None:
        self.c, self.id, self.topics = c, member_id, topics
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}
        self.epochs: list[int] = []

    def beat(self) -> HeartbeatResult:
        r = hb(
            self.c,
            self.id,
            self.epoch,
            topics=self.topics if self.epoch == 0 else None,
            owned=self.owned,
        )
        assert r.error_code == E.NONE, r
        self.epoch = r.member_epoch
        self.epochs.append(r.member_epoch)
        if r.assignment is not None:
            self.owned = {t: sorted(ps) for t, ps in r.assignment.items()}
        return r


def check_invariants(c: GroupCoordinator, group: str = "g") -> None:
    g = c.consumer_groups[group]
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m in g.members.values():
        for bucket in (m.assigned, m.pending_revocation):
            for t, ps in bucket.items():
                for p in ps:
                    assert (t, p) not in seen, f"{t}-{p} held by {seen[(t, p)]} and {m.member_id}"
                    seen[(t, p)] = m.member_id
        assert m.member_epoch <= g.assignment_epoch
    assert {k: v for k, v in g.owners.items()} == seen


def test_single_member_joins_and_gets_everything() -> None:
    async def scenario() -> None:
        topics = Topics()
        t = topics.add("t", 4)
        c = make(topics=topics)
        r = hb(c, "m1", 0)
        assert (r.error_code, r.member_epoch, r.member_id) == (E.NONE, 1, "m1")
        assert r.assignment == {t.topic_id: frozenset(range(4))}
        assert r.heartbeat_interval_ms == 5000
        again = hb(c, "m1", 1)
        assert again.assignment is None and again.member_epoch == 1
        assert c.consumer_groups["g"].state is ConsumerGroupState.STABLE

    run(scenario())


def test_revocation_before_assignment_and_epochs() -> None:
    async def scenario() -> None:
        topics = Topics()
        t = topics.add("t", 6)
        c = make(topics=topics)
        a = Client(c, "a", ["t"])
        a.beat()
        assert len(a.owned[t.topic_id]) == 6
        b = Client(c, "b", ["t"])
        rb = b.beat()
        # b is at the new epoch but gets nothing until a releases
        assert rb.member_epoch == 2 and parts(rb) == set()
        assert c.consumer_groups["g"].members["b"].state is MemberState.UNRELEASED_PARTITIONS
        check_invariants(c)
        ra = a.beat()  # a is asked to revoke 3: its assignment shrinks, its epoch stays
        assert ra.member_epoch == 1 and len(parts(ra)) == 3
        assert c.consumer_groups["g"].members["a"].state is MemberState.UNREVOKED_PARTITIONS
        check_invariants(c)
        rb = b.beat()
        assert parts(rb) == set() if rb.assignment is not None else True  # still held by a
        ra = a.beat()  # a confirms the revocation
        assert ra.member_epoch == 2
        rb = b.beat()
        assert len(parts(rb)) == 3 and not parts(rb) & set(a.owned[t.topic_id])
        check_invariants(c)
        assert c.consumer_groups["g"].state is ConsumerGroupState.STABLE
        assert a.epochs == sorted(a.epochs) and b.epochs == sorted(b.epochs)

    run(scenario())


def test_random_churn_keeps_invariants() -> None:
    async def scenario() -> None:
        rng = random.Random(42)
        topics = Topics()
        topics.add("t", 7)
        topics.add("u", 5)
        c = make(topics=topics)
        clients: dict[str, Client] = {}
        for step in range(400):
            action = rng.random()
            if action < 0.15 and len(clients) < 6:
                name = f"m{step}"
                clients[name] = Client(c, name, rng.choice([["t"], ["u"], ["t", "u"]]))
                clients[name].beat()
            elif action < 0.22 and clients:
                name = rng.choice(sorted(clients))
                r = hb(c, name, -1)
                assert r.member_epoch == -1
                del clients[name]
            elif action < 0.25:
                t = rng.choice(["t", "u"])
                topics.by_name[t].partitions.append(len(topics.by_name[t].partitions))
            elif clients:
                clients[rng.choice(sorted(clients))].beat()
            if clients:
                check_invariants(c)
        for _ in range(10):  # everyone converges
            for client in clients.values():
                client.beat()
        g = c.consumer_groups["g"]
        assert g.state is ConsumerGroupState.STABLE
        for client in clients.values():
            assert client.epochs == sorted(client.epochs)
            assert client.epoch == g.assignment_epoch

    run(scenario())


def test_error_codes() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 2)
        c = make(topics=topics, max_size=2)
        bad = [
            hb(c, "m", 0, group=""),
            hb(c, "", 0, api_version=1),
            hb(c, "m", 0, rebalance_timeout_ms=-1),
            hb(c, "m", 0, owned={uuid.uuid4(): [0]}),
            c.consumer_group_heartbeat(
                HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, topic_partitions={})
            ).result(),
            hb(c, "m", -3),
            hb(c, "m", -2),
            hb(c, "m", 0, instance_id=""),
        ]
        assert all(r.error_code == E.INVALID_REQUEST for r in bad), bad
        assert hb(c, "m", 0, server_assignor="nope").error_code == E.UNSUPPORTED_ASSIGNOR
        assert hb(c, "m", 0, subscribed_topic_regex="[").error_code == E.INVALID_REGULAR_EXPRESSION
        assert hb(c, "x", 3).error_code == E.UNKNOWN_MEMBER_ID
        assert hb(c, "m1", 0).error_code == E.NONE
        assert hb(c, "m1", 7).error_code == E.FENCED_MEMBER_EPOCH
        assert hb(c, "zz", 1).error_code == E.UNKNOWN_MEMBER_ID
        assert hb(c, "m2", 0, instance_id="i").error_code == E.NONE
        assert hb(c, "m3", 0).error_code == E.GROUP_MAX_SIZE_REACHED
        assert hb(c, "m3", 0, instance_id="i").error_code == E.UNRELEASED_INSTANCE_ID
        # v0: the coordinator generates the member id
        v0 = hb(c, "", 0, group="g0", api_version=0)
        assert v0.error_code == E.NONE and v0.member_id and uuid.UUID(v0.member_id)
        # classic and consumer group ids do not mix
        joined = await c.join_group(
            JoinRequest("g", "", None, False, "c", "/h", 1000, 1000, "consumer", [("range", b"")])
        )
        assert joined.error_code == E.INCONSISTENT_GROUP_PROTOCOL

    run(scenario())


def test_static_member_leave_and_rejoin_keeps_assignment() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 4)
        c = make(topics=topics)
        a = hb(c, "a", 0, instance_id="ia")
        hb(c, "b", 0)
        a = hb(
            c, "a", a.member_epoch, owned={t: sorted(p) for t, p in (a.assignment or {}).items()}
        )
        for _ in range(3):
            for m in ("a", "b"):
                g = c.consumer_groups["g"]
                mem = g.members[m]
                hb(c, m, mem.member_epoch, owned={t: sorted(p) for t, p in mem.assigned.items()})
        g = c.consumer_groups["g"]
        before = dict(g.members["a"].assigned)
        epoch = g.group_epoch
        left = hb(c, "a", -2, instance_id="ia")
        assert left.member_epoch == -2
        assert hb(c, "a2", 0, instance_id="ib").error_code == E.NONE  # another instance is new
        epoch_after_new = g.group_epoch
        assert epoch_after_new == epoch + 1
        back = hb(c, "a3", 0, instance_id="ia")
        assert back.error_code == E.NONE and back.assignment is not None
        assert "a" not in g.members and g.members["a3"].assigned == g.members["a3"].assigned
        assert g.group_epoch == epoch_after_new  # no rebalance for the returning instance
        assert set(before) <= set(back.assignment) or before == {}

    run(scenario())


def test_session_timeout_removes_member_and_bumps_epoch() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 2)
        c = make(topics=topics, session_timeout_ms=50)
        hb(c, "a", 0)
        hb(c, "b", 0)
        epoch = c.consumer_groups["g"].group_epoch
        for _ in range(4):
            await asyncio.sleep(0.02)
            hb(c, "b", c.consumer_groups["g"].members["b"].member_epoch)
        await asyncio.sleep(0.06)
        g = c.consumer_groups["g"]
        assert "a" not in g.members and g.group_epoch > epoch
        await asyncio.sleep(0.1)
        assert not g.members and g.state is ConsumerGroupState.EMPTY
        c.stop()

    run(scenario())


def test_topic_metadata_changes_bump_the_group_epoch() -> None:
    async def scenario() -> None:
        topics = Topics()
        c = make(topics=topics)
        r = hb(c, "a", 0, topics=["late"])
        assert r.assignment == {}
        epoch = c.consumer_groups["g"].group_epoch
        t = topics.add("late", 3)
        r = hb(c, "a", r.member_epoch)
        assert c.consumer_groups["g"].group_epoch == epoch + 1
        assert r.assignment == {t.topic_id: frozenset({0, 1, 2})}
        r = hb(c, "a", r.member_epoch, subscribed_topic_regex="la.*", topics=[])
        assert r.error_code == E.NONE and r.assignment is None  # same topics via the regex
        del topics.by_name["late"]
        r = hb(c, "a", r.member_epoch, owned={t.topic_id: [0, 1, 2]})
        assert r.assignment == {}

    run(scenario())


def test_regex_matches_internal_topics_too() -> None:
    """Kafka resolves a subscribed regex over every topic, internal ones included (found by
    franz-go's Test848RegexBrokerResolves, which subscribes to ``__consumer_offsets``)."""

    async def scenario() -> None:
        topics = Topics()
        orders = topics.add("orders", 2)
        offsets = topics.add("__consumer_offsets", 3)
        offsets.internal = True
        c = make(topics=topics)
        r = hb(c, "a", 0, subscribed_topic_regex="orders|__consumer_offsets")
        assert r.error_code == E.NONE
        assert r.assignment == {
            orders.topic_id: frozenset({0, 1}),
            offsets.topic_id: frozenset({0, 1, 2}),
        }

    run(scenario())


def test_offsets_validate_member_epoch() -> None:
    async def scenario() -> None:
        topics = Topics()
        topics.add("t", 2)
        c = make(topics=topics)
        hb(c, "a", 0)

        def commit(member: str, epoch: int, version: int = 9) -> int:
            return c.commit_offsets(
                CommitRequest("g", member, None, epoch, -1, {("t", 0): (5, -1, "")}, version)
            )[("t", 0)]

        assert commit("a", 1) == E.NONE
        assert commit("a", 0) == E.STALE_MEMBER_EPOCH
        assert commit("a", 2) == E.FENCED_MEMBER_EPOCH
        assert commit("b", 1) == E.UNKNOWN_MEMBER_ID
        assert commit("", -1) == E.UNKNOWN_MEMBER_ID
        assert commit("a", 1, 8) == E.UNSUPPORTED_VERSION
        assert c.fetch_offsets("g", [("t", [0])], "a", 0)[0] == E.STALE_MEMBER_EPOCH
        assert c.fetch_offsets("g", [("t", [0])], "b", 1)[0] == E.UNKNOWN_MEMBER_ID
        error, rows = c.fetch_offsets("g", [("t", [0])], "a", 1)
        assert error == E.NONE and rows[0][2] is not None and rows[0][2].offset == 5
        assert c.fetch_offsets("g", None)[0] == E.NONE  # admin: no member
        assert c.delete_groups(["g"]) == {"g": E.NON_EMPTY_GROUP}
        hb(c, "a", -1)
        assert commit("", -1) == E.NONE  # empty group: simple commits allowed
        assert ("g", "consumer", "Empty", "consumer") in c.list_groups_with_type()
        assert c.delete_groups(["g"]) == {"g": E.NONE}
        assert "g" not in c.consumer_groups and c.fetch_offsets("g", None)[1] == []

    run(scenario())


def test_replay_after_restart() -> None:
    async def scenario() -> None:
        topics = Topics()
        t = topics.add("t", 4)
        log = MemoryLog()
        c = make(log, topics)
        a = Client(c, "a", ["t"])
        b = Client(c, "b", ["t"])
        for _ in range(4):
            a.beat()
            b.beat()
        c.commit_offsets(CommitRequest("g", "a", None, a.epoch, -1, {("t", 0): (9, -1, "m")}, 9))
        hb(c, "s", 0, instance_id="i")
        hb(c, "s", -2, instance_id="i")
        before = c.consumer_groups["g"]
        snapshot = (
            before.group_epoch,
            before.assignment_epoch,
            {
                m.member_id: (m.member_epoch, m.state, m.assigned, m.left_static)
                for m in before.members.values()
            },
            dict(before.target),
            dict(before.owners),
        )
        c.stop()
        c2 = make(log, topics)
        after = c2.consumer_groups["g"]
        assert (
            after.group_epoch,
            after.assignment_epoch,
            {
                m.member_id: (m.member_epoch, m.state, m.assigned, m.left_static)
                for m in after.members.values()
            },
            dict(after.target),
            dict(after.owners),
        ) == snapshot
        assert "g" not in c2.groups  # not also a classic group
        assert c2.fetch_offsets("g", [("t", [0])], "a", a.epoch)[1][0][2].offset == 9  # type: ignore[union-attr]
        # the restored member keeps heartbeating at its epoch
        r = hb(c2, "a", a.epoch, owned=a.owned)
        assert r.error_code == E.NONE
        assert t.topic_id in (c2.consumer_groups["g"].members["a"].assigned or {t.topic_id: 0})
        c2.stop()

    run(scenario())


def test_a_regex_subscription_matches_internal_topics() -> None:
    """Kafka resolves a member's regex over every topic: __consumer_offsets included."""

    async def scenario() -> None:
        topics = Topics()
        offsets = topics.add("__consumer_offsets", 2)
        offsets.internal = True
        other = topics.add("__other", 1)
        topics.add("plain", 1)
        c = make(topics=topics)
        r = hb(c, "m", 0, subscribed_topic_regex="__.*")
        assert r.error_code == E.NONE
        assert r.assignment == {
            offsets.topic_id: frozenset({0, 1}),
            other.topic_id: frozenset({0}),
        }

    run(scenario())


def test_re2_only_syntax_subscribes() -> None:
    async def scenario() -> None:
        topics = Topics()
        t = topics.add("orders.v1", 1)
        c = make(topics=topics)
        r = hb(c, "m", 0, subscribed_topic_regex="\\Qorders.\\E[[:alnum:]]+\\z")
        assert r.error_code == E.NONE
        assert r.assignment == {t.topic_id: frozenset({0})}
        bad = hb(c, "n", 0, group="g2", subscribed_topic_regex="orders(?=\\.)")
        assert bad.error_code == E.INVALID_REGULAR_EXPRESSION
        assert bad.error_message == (
            "SubscribedTopicRegex `orders(?=\\.)` is not a valid regular expression: "
            "invalid or unsupported Perl syntax."
        )

    run(scenario())
