"""Cluster mode of the group coordinator: a group is coordinated by the leader of its
``__consumer_offsets`` partition. Elections load a partition's groups (in the background:
meanwhile COORDINATOR_LOAD_IN_PROGRESS), resignations unload them (NOT_COORDINATOR, pending
joins failed, timers cancelled), and writes are answered once committed.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydmq.config.broker import BrokerConfig
from pydmq.coordinator.api import CoordinatorWriteError
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.api import CommitRequest, GroupConfig, JoinRequest
from pydmq.groups.consumer.api import HeartbeatRequest
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.log import OFFSETS_TOPIC, ConsumerOffsetsLog, partition_for
from pydmq.groups.shard import GroupCoordinatorShard
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.nodes import broker_of

T = TypeVar("T")
PARTITIONS = 4


class PartitionedLog:
    """``__consumer_offsets`` in memory, with ``PARTITIONS`` partitions. With ``hold`` set,
    appends stay uncommitted until :meth:`commit` (or :meth:`fail`) resolves them."""

    cluster_mode = True

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {
            i: [] for i in range(PARTITIONS)
        }
        self.hold = False
        self.refuse: int | None = None
        self.pending: list[asyncio.Future[int]] = []
        self.replayed = 0

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, PARTITIONS)

    num_partitions = PARTITIONS

    def append(
        self, partition: int, records: Sequence[tuple[bytes, bytes | None]]
    ) -> asyncio.Future[int] | None:
        if self.refuse is not None:
            raise CoordinatorWriteError(self.refuse)
        self.partitions[partition].extend(records)
        if not self.hold:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        return future

    def commit(self, code: int = E.NONE) -> None:
        for future in self.pending:
            if not future.done():
                future.set_result(code)
        self.pending.clear()

    def replay_partition(self, index: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(list(self.partitions[index])):
            self.replayed += 1
            yield Record(offset, 0, key, value, ())


def shard_timer(c: GroupCoordinator, group_id: str) -> CoordinatorTimer[GroupCoordinatorShard]:
    """The timers of the shard of ``group_id``'s partition (which must be loaded here)."""
    partition = c._log.partition_for(group_id)
    return c._runtime.read(partition, lambda shard: shard.timer)


def groups_in(index: int, count: int = 1, prefix: str = "g") -> list[str]:
    """Group ids whose partition is ``index``."""
    out: list[str] = []
    n = 0
    while len(out) < count:
        group_id = f"{prefix}{n}"
        if partition_for(group_id, PARTITIONS) == index:
            out.append(group_id)
        n += 1
    return out


def make(log: PartitionedLog) -> GroupCoordinator:
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    return GroupCoordinator(config, log)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


def jreq(group: str, member_id: str = "", session: int = 10_000) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=None,
        require_known_member_id=False,
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=10_000,
        session_timeout_ms=session,
        protocol_type="consumer",
        protocols=[("range", b"meta")],
    )


def commit(group: str, offset: int) -> CommitRequest:
    return CommitRequest(group, "", None, -1, -1, {("t", 0): (offset, -1, "")})


async def elect(c: GroupCoordinator, index: int, epoch: int = 1) -> None:
    task = c.on_elected(index, epoch)
    assert task is not None
    await task


def test_cluster_mode_owns_nothing_until_elected() -> None:
    async def scenario() -> None:
        c = make(PartitionedLog())
        assert not c.owns_all_partitions
        c.load()  # cluster mode: nothing happens at start-up
        group = groups_in(0)[0]
        assert c.ownership_error(group) == E.NOT_COORDINATOR
        assert (await c.join_group(jreq(group))).error_code == E.NOT_COORDINATOR
        assert c.heartbeat(group, 1, "m", None) == E.NOT_COORDINATOR
        assert set(c.commit_offsets(commit(group, 5)).values()) == {E.NOT_COORDINATOR}
        assert c.fetch_offsets(group, None)[0] == E.NOT_COORDINATOR
        assert c.describe_group(group)[0] == E.NOT_COORDINATOR
        assert c.delete_groups([group]) == {group: E.NOT_COORDINATOR}
        assert c.delete_offsets(group, [("t", 0)])[0] == E.NOT_COORDINATOR
        assert c.leave_group(group, [("m", None)])[0] == E.NOT_COORDINATOR
        hb = c.consumer_group_heartbeat(HeartbeatRequest(group, "m", 3)).result()
        assert hb.error_code == E.NOT_COORDINATOR
        await elect(c, 0)
        assert c.ownership_error(group) == E.NONE
        assert c.ownership_error(groups_in(1)[0]) == E.NOT_COORDINATOR
        assert set(c.commit_offsets(commit(group, 5)).values()) == {E.NONE}

    run(scenario())


def test_election_loads_only_that_partition() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        writer = make(log)
        await elect(writer, 0)
        await elect(writer, 1)
        in0, in1 = groups_in(0)[0], groups_in(1)[0]
        writer.commit_offsets(commit(in0, 10))
        writer.commit_offsets(commit(in1, 20))
        writer.stop()

        c = make(log)
        await elect(c, 1, epoch=3)
        assert c.owned_partitions() == {1: (3, False)}
        assert in1 in c.groups and in0 not in c.groups
        offset = c.offsets.get(in1, "t", 0)
        assert offset is not None and offset.offset == 20
        assert c.offsets.get(in0, "t", 0) is None
        assert c.fetch_offsets(in0, None)[0] == E.NOT_COORDINATOR
        error, rows = c.fetch_offsets(in1, [("t", [0])])
        assert error == E.NONE and rows[0][2] is not None and rows[0][2].offset == 20

    run(scenario())


def test_requests_answer_load_in_progress_while_loading() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        groups = groups_in(2, 3)
        # enough records that the load yields to the loop several times
        for n in range(5000):
            log.partitions[2].append((_offset_key(groups[n % 3], n % 7), _offset_value(n)))
        c = make(log)
        task = c.on_elected(2, 1)
        assert task is not None
        await asyncio.sleep(0)
        assert c.loading
        assert c.ownership_error(groups[0]) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert (await c.join_group(jreq(groups[0]))).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.fetch_offsets(groups[0], None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.list_groups_error() == E.COORDINATOR_LOAD_IN_PROGRESS
        assert 0 < log.replayed < 5000  # the load is under way, not done in one go
        await task
        assert not c.loading and c.list_groups_error() == E.NONE
        error, rows = c.fetch_offsets(groups[0], None)
        assert error == E.NONE and len(rows) == 7
        assert c.on_elected(2, 2) is None  # already led: the epoch moves, nothing reloads
        assert c.owned_partitions() == {2: (2, False)}

    run(scenario())


def test_resignation_unloads_groups_and_fails_pending_joins() -> None:
    async def scenario() -> None:
        c = make(PartitionedLog())
        await elect(c, 0, epoch=4)
        await elect(c, 1, epoch=4)
        group, other = groups_in(0)[0], groups_in(1)[0]
        first = await c.join_group(jreq(group))
        assert first.error_code == E.NONE
        synced = await c.sync_group(
            group, first.generation_id, first.member_id, None, None, None, {first.member_id: b"a"}
        )
        assert synced.error_code == E.NONE
        # a second member's join makes the group rebalance: both wait for the first to rejoin
        second = asyncio.ensure_future(c.join_group(jreq(group)))
        await asyncio.sleep(0.01)
        assert not second.done()
        member = c.groups[group].members[first.member_id]
        assert member.heartbeat_timer is not None
        c.commit_offsets(commit(other, 1))

        c.on_resigned(0, 3)  # stale: elected at epoch 4
        assert c.ownership_error(group) == E.NONE
        c.on_resigned(0, 5)
        joined = await second
        assert joined.error_code == E.NOT_COORDINATOR
        assert group not in c.groups
        assert member.heartbeat_timer is None
        assert c.heartbeat(group, first.generation_id, first.member_id, None) == E.NOT_COORDINATOR
        assert c.ownership_error(group) == E.NOT_COORDINATOR
        assert c.offsets.get(other, "t", 0) is not None  # partition 1 untouched
        assert c.owned_partitions() == {1: (4, False)}

    run(scenario())


def test_resignation_during_load_discards_it() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        group = groups_in(3)[0]
        for n in range(5000):
            log.partitions[3].append((_offset_key(group, n % 5), _offset_value(n)))
        c = make(log)
        task = c.on_elected(3, 1)
        assert task is not None
        await asyncio.sleep(0)
        c.on_resigned(3, None)
        await asyncio.sleep(0)
        assert task.done()
        assert c.ownership_error(group) == E.NOT_COORDINATOR
        assert not c.offsets.has_offsets(group) and group not in c.groups
        assert not c.loading

    run(scenario())


def test_offset_commit_waits_for_the_commit() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        c = make(log)
        await elect(c, 0)
        group = groups_in(0)[0]
        log.hold = True
        mark = c.write_mark
        assert set(c.commit_offsets(commit(group, 7)).values()) == {E.NONE}
        assert c.wrote_since(group, mark)
        waiting = asyncio.ensure_future(c.await_writes(group, mark, offsets=True))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        log.commit()
        assert await waiting == E.NONE

        mark = c.write_mark
        c.commit_offsets(commit(group, 8))
        waiting = asyncio.ensure_future(c.await_writes(group, mark, offsets=True))
        log.commit(E.NOT_ENOUGH_REPLICAS)
        assert await waiting == E.COORDINATOR_NOT_AVAILABLE

        mark = c.write_mark
        c.commit_offsets(commit(group, 9))
        waiting = asyncio.ensure_future(c.await_writes(group, mark, offsets=True))
        await asyncio.sleep(0)
        c.on_resigned(0, 2)  # leadership moves before the commit
        assert await waiting == E.NOT_COORDINATOR

    run(scenario())


def test_sync_group_hands_out_the_assignment_once_committed() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        c = make(log)
        await elect(c, 1)
        group = groups_in(1)[0]
        joined = await c.join_group(jreq(group))
        log.hold = True
        sync = asyncio.ensure_future(
            c.sync_group(
                group,
                joined.generation_id,
                joined.member_id,
                None,
                None,
                None,
                {joined.member_id: b"assigned"},
            )
        )
        await asyncio.sleep(0.01)
        assert not sync.done()
        assert c.groups[group].state.value == "CompletingRebalance"
        log.commit()
        result = await sync
        assert result.error_code == E.NONE and result.assignment == b"assigned"
        assert c.groups[group].state.value == "Stable"

    run(scenario())


def test_sync_group_fails_when_the_commit_fails() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        c = make(log)
        await elect(c, 1)
        group = groups_in(1)[0]
        joined = await c.join_group(jreq(group))
        log.hold = True
        sync = asyncio.ensure_future(
            c.sync_group(group, joined.generation_id, joined.member_id, None, None, None, {})
        )
        await asyncio.sleep(0.01)
        log.commit(E.NOT_LEADER_OR_FOLLOWER)
        assert (await sync).error_code == E.NOT_COORDINATOR
        assert c.groups[group].state.value == "PreparingRebalance"
        c.stop()

    run(scenario())


def test_refused_append_maps_to_coordinator_errors() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        c = make(log)
        await elect(c, 0)
        group = groups_in(0)[0]
        log.refuse = E.NOT_LEADER_OR_FOLLOWER
        assert set(c.commit_offsets(commit(group, 1)).values()) == {E.NOT_COORDINATOR}
        log.refuse = E.MESSAGE_TOO_LARGE
        assert set(c.commit_offsets(commit(group, 1)).values()) == {E.INVALID_COMMIT_OFFSET_SIZE}
        assert c.offsets.get(group, "t", 0) is None

    run(scenario())


def test_single_node_owns_every_partition() -> None:
    async def scenario() -> None:
        log = PartitionedLog()
        log.cluster_mode = False
        c = make(log)
        assert c.owns_all_partitions
        assert c.on_elected(0, 1) is None
        c.on_resigned(0, 2)  # ignored: single-node mode leads everything
        for index in range(PARTITIONS):
            assert c.ownership_error(groups_in(index)[0]) == E.NONE

    run(scenario())


def test_consumer_groups_follow_their_partition(tmp_path: Path) -> None:
    """KIP-848 groups are loaded and unloaded with the partition, on a real offsets log
    (memory engine) read back through ``replay_partition``."""

    async def scenario() -> None:
        broker = broker_of(
            BrokerConfig(
                {
                    "listeners": "PLAINTEXT://127.0.0.1:0",
                    "log.dirs": str(tmp_path / "d"),
                    "log.engine": "memory",
                    "offsets.topic.num.partitions": PARTITIONS,
                }
            )
        )
        broker.open_logs()
        try:
            broker.topic_creator.create_topic("t", 2)
            single = broker.group_coordinator
            single.load()
            group = groups_in(2, prefix="cg")[0]
            result = single.consumer_group_heartbeat(
                HeartbeatRequest(
                    group,
                    str(uuid.uuid4()),
                    0,
                    rebalance_timeout_ms=5000,
                    subscribed_topic_names=["t"],
                    topic_partitions={},
                )
            ).result()
            assert result.error_code == E.NONE and result.member_epoch == 1
            single.stop()

            log = ConsumerOffsetsLog(broker)
            assert broker.topics.get(OFFSETS_TOPIC) is not None
            c = GroupCoordinator(
                GroupConfig(), log, topics=broker.topics, owns_all_partitions=False
            )
            await elect(c, 2)
            assert group in c.consumer_groups
            member = next(iter(c.consumer_groups[group].members.values()))
            timer = shard_timer(c, group)
            assert timer is not None
            assert timer.is_scheduled(("consumer-session", group, member.member_id))  # at load
            c.on_resigned(2, 2)
            assert group not in c.consumer_groups
            assert len(timer) == 0
            stale = c.consumer_group_heartbeat(
                HeartbeatRequest(group, member.member_id, 1)
            ).result()
            assert stale.error_code == E.NOT_COORDINATOR
        finally:
            broker.replica_manager.shutdown()

    run(scenario())


def _offset_key(group: str, partition: int) -> bytes:
    from pydmq.groups.records import OffsetCommitKey

    return OffsetCommitKey(group, "t", partition).encode()


def _offset_value(offset: int) -> bytes:
    from pydmq.groups.records import OffsetCommitValue

    return OffsetCommitValue(offset, -1, "", 0, -1).encode()


def test_leadership_listener_elects_and_resigns() -> None:
    from pydmq.coordinator.leadership import coordinator_leadership_listener
    from pydmq.storage.api import TopicPartition

    class Replica:
        def __init__(self, epoch: int) -> None:
            self.leader_epoch = epoch

    async def scenario() -> None:
        c = make(PartitionedLog())
        hosted: dict[TopicPartition, Replica] = {}
        listener = coordinator_leadership_listener(OFFSETS_TOPIC, c, hosted)
        tp = TopicPartition(OFFSETS_TOPIC, 1)
        hosted[tp] = Replica(7)
        listener(tp, True)
        listener(TopicPartition("other", 1), True)
        assert c.owned_partitions() == {1: (7, True)}
        await asyncio.sleep(0.01)
        assert c.owned_partitions() == {1: (7, False)}
        hosted[tp] = Replica(8)
        listener(tp, False)  # follower at epoch 8
        assert c.owned_partitions() == {}
        hosted[tp] = Replica(9)
        listener(tp, True)
        del hosted[tp]
        listener(tp, False)  # replica stopped
        assert c.owned_partitions() == {}

    run(scenario())


class _Cache:
    def __init__(self, endpoints: dict[int, tuple[str, int]]) -> None:
        self.endpoints = endpoints

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        return self.endpoints.get(broker_id) if listener == "PLAINTEXT" else None


class _ClusterBroker:
    """What FindCoordinator reads of a cluster-mode broker."""

    def __init__(self, topics: Any, endpoints: dict[int, tuple[str, int]]) -> None:
        from types import SimpleNamespace

        self.config = SimpleNamespace(is_cluster_mode=True)
        self.authorizer = None
        self.node_id = 1
        self.topics = topics
        self.metadata = _Cache(endpoints)
        self.creations = 0
        broker = self

        class _Log:
            def request_creation(self) -> None:
                broker.creations += 1

        self.group_coordinator_log = _Log()

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        return "self-host", 9092


def _find(broker: _ClusterBroker, keys: list[str], listener: str = "PLAINTEXT") -> list[Any]:
    from pydmq.api.handler import RequestContext
    from pydmq.broker.handlers.find_coordinator import handle
    from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest

    ctx = RequestContext(broker, 10, 4, 1, "c", "127.0.0.1", 1, listener, 1)  # type: ignore[arg-type]
    response = handle(ctx, FindCoordinatorRequest(key_type=0, coordinator_keys=keys))
    return list(response.coordinators)


def test_find_coordinator_in_cluster_mode(tmp_path: Path) -> None:
    from pydmq.broker.topics import PartitionInfo, TopicInfo, TopicRegistry

    topics = TopicRegistry()
    broker = _ClusterBroker(topics, {1: ("self-host", 9092), 2: ("two", 9093)})
    missing = _find(broker, ["a"])
    assert missing[0].error_code == E.COORDINATOR_NOT_AVAILABLE and broker.creations == 1

    leaders = {0: 1, 1: 2, 2: -1, 3: 3}  # broker 3 is not alive
    topics.add(
        TopicInfo(
            OFFSETS_TOPIC,
            uuid.uuid4(),
            [PartitionInfo(i, leader, 5, [1, 2, 3], [1, 2, 3]) for i, leader in leaders.items()],
            internal=True,
        )
    )
    keys = [groups_in(i)[0] for i in range(PARTITIONS)]
    found = {c.key: c for c in _find(broker, keys)}
    assert (found[keys[0]].node_id, found[keys[0]].host, found[keys[0]].port) == (
        1,
        "self-host",
        9092,
    )
    assert (found[keys[1]].node_id, found[keys[1]].host, found[keys[1]].port) == (2, "two", 9093)
    assert found[keys[2]].error_code == E.COORDINATOR_NOT_AVAILABLE  # no leader
    assert found[keys[3]].error_code == E.COORDINATOR_NOT_AVAILABLE  # leader not alive
    other_listener = _find(broker, [keys[1]], listener="INTERNAL")
    assert other_listener[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert broker.creations == 1


def test_offset_commit_handler_answers_once_committed(tmp_path: Path) -> None:
    import inspect
    from types import SimpleNamespace

    from pydmq.api.handler import RequestContext
    from pydmq.broker.handlers.offset_commit import handle
    from pydmq.broker.topics import PartitionInfo, TopicInfo, TopicRegistry
    from pydmq.protocol.messages.offset_commit import (
        OffsetCommitRequest,
        OffsetCommitRequestPartition,
        OffsetCommitRequestTopic,
    )

    async def scenario() -> None:
        log = PartitionedLog()
        c = make(log)
        group = groups_in(0)[0]
        await elect(c, 0)
        topics = TopicRegistry()
        topics.add(TopicInfo("t", uuid.uuid4(), [PartitionInfo(0, 1, 0, [1], [1])]))
        broker = SimpleNamespace(topics=topics, group_coordinator=c, authorizer=None)
        ctx = RequestContext(broker, 8, 9, 1, "c", "127.0.0.1", 1, "PLAINTEXT", 1)  # type: ignore[arg-type]

        def request(offset: int) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    OffsetCommitRequestTopic(
                        name="t",
                        partitions=[
                            OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
                        ],
                    )
                ],
            )

        def code(response: Any) -> int:
            return int(response.topics[0].partitions[0].error_code)

        immediate = handle(ctx, request(1))
        assert not inspect.isawaitable(immediate) and code(immediate) == E.NONE
        log.hold = True
        pending = handle(ctx, request(2))
        assert inspect.isawaitable(pending)
        waiting = asyncio.ensure_future(pending)
        await asyncio.sleep(0.01)
        assert not waiting.done()
        log.commit()
        assert code(await waiting) == E.NONE
        lost = handle(ctx, request(3))
        assert inspect.isawaitable(lost)
        c.on_resigned(0, 2)  # before the response coroutine even starts
        assert code(await lost) == E.NOT_COORDINATOR

    run(scenario())
