"""CoordinatorRuntime over an in-memory partition: load, queue, write-then-commit, timers.

The shard is a key-value map changed only by replay; the partition port holds appends
uncommitted until the test commits (or fails) them, and can refuse an append outright.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import (
    CoordinatorError,
    CoordinatorRecord,
    CoordinatorResult,
    CoordinatorWriteError,
)
from pydmq.coordinator.events import EventQueue
from pydmq.coordinator.runtime import CoordinatorRuntime
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
KV = tuple[bytes, bytes | None]


class MapShard:
    """A shard whose state is the latest value of each key (tombstones delete)."""

    def __init__(self, partition: int, timer: CoordinatorTimer[MapShard]) -> None:
        self.partition = partition
        self.timer = timer
        self.state: dict[bytes, bytes] = {}
        self.replayed = 0
        self.loaded = False
        self.unloaded = False

    def replay(self, record: KV) -> None:
        key, value = record
        self.replayed += 1
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def on_loaded(self) -> None:
        self.loaded = True

    def on_unloaded(self) -> None:
        self.unloaded = True


class Serde:
    """Records are the stored key/value pairs themselves; keyless ones are skipped."""

    def serialize(self, record: KV) -> CoordinatorRecord:
        return record

    def deserialize(self, key: bytes | None, value: bytes | None) -> KV | None:
        return None if key is None else (key, value)


class MemoryPartitions:
    """Partitions in memory. With ``hold``, appends wait for :meth:`commit` / :meth:`fail`."""

    def __init__(self) -> None:
        self.logs: dict[int, list[CoordinatorRecord]] = {}
        self.hold = False
        self.refuse: int | None = None
        self.waiting: list[asyncio.Future[int]] = []
        self.log_end: list[asyncio.Future[int]] = []  # await_committed's, settled by tests

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        if self.refuse is not None:
            raise CoordinatorWriteError(self.refuse)
        self.logs.setdefault(partition, []).extend(records)
        if not self.hold:
            return None
        self.waiting.append(asyncio.get_running_loop().create_future())
        return self.waiting[-1]

    def settle(self, index: int, code: int = E.NONE) -> None:
        self.waiting[index].set_result(code)

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(list(self.logs.get(partition, []))):
            yield Record(offset, 0, key, value, ())

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        self.log_end.append(asyncio.get_running_loop().create_future())
        return self.log_end[-1]


def put(key: bytes, value: bytes | None, response: str = "ok") -> Any:
    def operation(shard: MapShard) -> CoordinatorResult[KV, str]:
        return CoordinatorResult([(key, value)], response)

    return operation


def make(log: MemoryPartitions, **kw: Any) -> CoordinatorRuntime[MapShard, KV]:
    return CoordinatorRuntime("__state", log, Serde(), MapShard, **kw)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


async def settle_callbacks() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def value_of(rt: CoordinatorRuntime[MapShard, KV], partition: int, key: bytes) -> bytes | None:
    return rt.read(partition, lambda shard: shard.state.get(key))


def test_a_write_committed_at_append_is_replayed_before_schedule_write_returns() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        rt = make(log)
        rt.load_now(0)
        future = rt.schedule_write(0, put(b"k", b"v", "answer"))
        assert future.done() and future.result() == "answer"
        assert value_of(rt, 0, b"k") == b"v"
        assert log.logs[0] == [(b"k", b"v")]

    run(scenario())


def test_records_are_replayed_and_answered_only_once_committed() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        future = rt.schedule_write(0, put(b"k", b"v"))
        assert log.logs[0] == [(b"k", b"v")]  # appended at once
        assert not future.done() and value_of(rt, 0, b"k") is None  # reads: committed only
        assert rt.pending_writes(0) == 1
        log.settle(0)
        assert await future == "ok"
        assert value_of(rt, 0, b"k") == b"v" and rt.pending_writes(0) == 0

    run(scenario())


def test_writes_complete_in_append_order_whatever_order_their_commits_settle() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        first = rt.schedule_write(0, put(b"k", b"1", "first"))
        second = rt.schedule_write(0, put(b"k", b"2", "second"))
        empty = rt.schedule_write(0, lambda shard: CoordinatorResult([], "empty"))
        log.settle(1)
        await settle_callbacks()
        assert not second.done() and not empty.done()  # waits for the first
        assert value_of(rt, 0, b"k") is None
        log.settle(0)
        assert list(await asyncio.gather(first, second, empty)) == ["first", "second", "empty"]
        assert value_of(rt, 0, b"k") == b"2"  # the older never overwrites the newer

    run(scenario())


def test_a_refused_append_fails_the_write_and_changes_nothing() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        rt = make(log)
        rt.load_now(0)
        log.refuse = E.KAFKA_STORAGE_ERROR
        future = rt.schedule_write(0, put(b"k", b"v"))
        with pytest.raises(CoordinatorError) as caught:
            future.result()
        assert caught.value.error_code == E.KAFKA_STORAGE_ERROR
        assert value_of(rt, 0, b"k") is None and rt.pending_writes(0) == 0
        log.refuse = None
        assert rt.schedule_write(0, put(b"k", b"w")).result() == "ok"  # the shard goes on
        assert value_of(rt, 0, b"k") == b"w"

    run(scenario())


def test_a_write_whose_commit_fails_is_never_replayed() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        failed = rt.schedule_write(0, put(b"k", b"lost"))
        kept = rt.schedule_write(0, put(b"j", b"kept"))
        log.settle(0, E.NOT_LEADER_OR_FOLLOWER)
        log.settle(1)
        with pytest.raises(CoordinatorError) as caught:
            await failed
        assert caught.value.error_code == E.NOT_LEADER_OR_FOLLOWER
        assert await kept == "ok"
        assert value_of(rt, 0, b"k") is None and value_of(rt, 0, b"j") == b"kept"

    run(scenario())


def test_an_operation_that_raises_fails_its_write_only() -> None:
    async def scenario() -> None:
        rt = make(MemoryPartitions())
        rt.load_now(0)

        def refused(shard: MapShard) -> CoordinatorResult[KV, str]:
            raise CoordinatorError(E.GROUP_ID_NOT_FOUND)

        def broken(shard: MapShard) -> CoordinatorResult[KV, str]:
            raise ValueError("bug")

        with pytest.raises(CoordinatorError) as caught:
            rt.schedule_write(0, refused).result()
        assert caught.value.error_code == E.GROUP_ID_NOT_FOUND
        with pytest.raises(CoordinatorError) as caught:
            rt.schedule_write(0, broken).result()
        assert caught.value.error_code == E.COORDINATOR_NOT_AVAILABLE
        assert rt.schedule_write(0, put(b"k", b"v")).result() == "ok"

    run(scenario())


def test_losing_leadership_mid_write_fails_it_with_not_coordinator() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0, 3)
        shard = rt.read(0, lambda s: s)
        future = rt.schedule_write(0, put(b"k", b"v"))
        rt.schedule_unload(0, 2)  # older than the election: ignored
        assert rt.status(0) == E.NONE
        rt.schedule_unload(0, 4)
        assert shard.unloaded and rt.status(0) == E.NOT_COORDINATOR
        with pytest.raises(CoordinatorError) as caught:
            await future
        assert caught.value.error_code == E.NOT_COORDINATOR
        log.settle(0)  # the commit settling later changes nothing
        await settle_callbacks()
        assert shard.state == {}
        with pytest.raises(CoordinatorError) as caught:
            rt.read(0, lambda s: s.state)
        assert caught.value.error_code == E.NOT_COORDINATOR
        with pytest.raises(CoordinatorError):
            rt.schedule_write(0, put(b"k", b"v")).result()

    run(scenario())


def test_reload_from_records_rebuilds_the_same_state() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        rt = make(log)
        rt.load_now(1)
        for key, value in [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")]:
            rt.schedule_write(1, put(key, value)).result()
        before = dict(rt.read(1, lambda s: s.state))
        rt.schedule_unload(1)
        fresh = make(log, load_yield_records=2)
        task = fresh.schedule_load(1, 5)
        assert task is not None
        assert fresh.status(1) == E.COORDINATOR_LOAD_IN_PROGRESS and fresh.loading
        assert fresh.partitions() == {1: (5, True)}
        with pytest.raises(CoordinatorError) as caught:
            fresh.schedule_write(1, put(b"x", b"y")).result()
        assert caught.value.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        await task
        assert fresh.read(1, lambda s: s.state) == before == {b"b": b"2", b"c": b"3"}
        assert fresh.read(1, lambda s: s.loaded)
        assert fresh.schedule_load(1, 6) is None  # still the leader: no reload, newer epoch
        assert fresh.partitions() == {1: (6, False)} and fresh.active_partitions() == [1]

    run(scenario())


def test_unloading_during_the_load_abandons_it() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.logs[0] = [(b"k%d" % i, b"v") for i in range(10)]
        rt = make(log, load_yield_records=2)
        task = rt.schedule_load(0, 1)
        assert task is not None
        await asyncio.sleep(0)
        rt.schedule_unload(0)
        await asyncio.gather(task, return_exceptions=True)
        assert rt.status(0) == E.NOT_COORDINATOR and rt.partitions() == {}

    run(scenario())


def test_a_failed_load_leaves_the_partition_not_coordinated() -> None:
    class Broken(MemoryPartitions):
        def replay_partition(self, partition: int) -> Iterator[Record]:
            raise OSError("unreadable")

    async def scenario() -> None:
        rt = make(Broken())
        task = rt.schedule_load(0, 1)
        assert task is not None
        await task
        assert rt.status(0) == E.NOT_COORDINATOR

    run(scenario())


def test_timers_fire_as_writes_through_the_queue_and_die_with_the_shard() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        rt = make(log)
        rt.load_now(0)
        rt.load_now(1)
        fired = asyncio.Event()

        def expire(shard: MapShard) -> CoordinatorResult[KV, None]:
            fired.set()
            return CoordinatorResult([(b"expired", b"yes")], None)

        def never(shard: MapShard) -> CoordinatorResult[KV, None]:
            raise AssertionError("a cancelled or unloaded timer fired")

        def arm(shard: MapShard) -> CoordinatorResult[KV, None]:
            shard.timer.schedule("expire", 1, expire)
            shard.timer.schedule("replaced", 1, never)
            shard.timer.schedule("replaced", 60_000, never)
            shard.timer.schedule("cancelled", 1, never)
            shard.timer.cancel("cancelled")
            return CoordinatorResult([], None)

        rt.schedule_write(0, arm).result()
        timer = rt.read(0, lambda s: s.timer)
        assert timer.is_scheduled("expire") and not timer.is_scheduled("cancelled")
        assert len(timer) == 2
        await fired.wait()
        await settle_callbacks()
        assert value_of(rt, 0, b"expired") == b"yes"  # written and replayed like any write
        assert not timer.is_scheduled("expire") and timer.is_scheduled("replaced")

        def arm_never(shard: MapShard) -> CoordinatorResult[KV, None]:
            shard.timer.schedule("unloaded", 1, never)
            return CoordinatorResult([], None)

        rt.schedule_write(1, arm_never).result()
        other = rt.read(1, lambda s: s.timer)
        rt.schedule_unload(1)
        rt.schedule_unload(0)
        assert len(other) == 0 and len(timer) == 0
        await asyncio.sleep(0.05)  # the 1 ms timers would have fired by now

    run(scenario())


def test_events_scheduled_while_one_runs_wait_for_it() -> None:
    queue = EventQueue("q")
    order: list[str] = []

    def outer() -> None:
        order.append("outer-start")
        queue.schedule(lambda: order.append("inner"))
        assert len(queue) == 1
        order.append("outer-end")

    def broken() -> None:
        raise RuntimeError("logged, the queue goes on")

    queue.schedule(outer)
    queue.schedule(broken)
    queue.schedule(lambda: order.append("after"))
    assert order == ["outer-start", "outer-end", "inner", "after"]
    assert len(queue) == 0


def test_writes_queued_by_a_running_write_see_its_committed_result() -> None:
    async def scenario() -> None:
        rt = make(MemoryPartitions())
        rt.load_now(0)
        seen: list[bytes | None] = []

        def nested(shard: MapShard) -> CoordinatorResult[KV, str]:
            seen.append(shard.state.get(b"k"))
            return CoordinatorResult([], "nested")

        def first(shard: MapShard) -> CoordinatorResult[KV, str]:
            inner.append(rt.schedule_write(0, nested))
            assert not inner[0].done()  # queued behind this one
            return CoordinatorResult([(b"k", b"v")], "first")

        inner: list[asyncio.Future[str]] = []
        assert rt.schedule_write(0, first).result() == "first"
        assert inner[0].result() == "nested" and seen == [b"v"]

    run(scenario())


def test_close_drops_every_shard() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        rt.load_now(1)
        future = rt.schedule_write(1, put(b"k", b"v"))
        rt.close()
        assert rt.partitions() == {}
        with pytest.raises(CoordinatorError):
            await future

    run(scenario())


def test_a_writes_records_are_replayed_as_built_and_decoded_only_at_load() -> None:
    class CountingSerde(Serde):
        def __init__(self) -> None:
            self.serialized = 0
            self.deserialized = 0

        def serialize(self, record: KV) -> CoordinatorRecord:
            self.serialized += 1
            return record

        def deserialize(self, key: bytes | None, value: bytes | None) -> KV | None:
            self.deserialized += 1
            return super().deserialize(key, value)

    async def scenario() -> None:
        log = MemoryPartitions()
        log.logs[0] = [(b"old", b"1")]
        serde = CountingSerde()
        rt: CoordinatorRuntime[MapShard, KV] = CoordinatorRuntime("__state", log, serde, MapShard)
        rt.load_now(0)
        assert serde.deserialized == 1
        rt.schedule_write(0, put(b"new", b"2")).result()
        assert (serde.serialized, serde.deserialized) == (1, 1)
        assert rt.read(0, lambda s: s.state) == {b"old": b"1", b"new": b"2"}

    run(scenario())


def increment(key: bytes) -> Any:
    """A read-modify-write: the next value of ``key`` is computed from the shard's."""

    def operation(shard: MapShard) -> CoordinatorResult[KV, int]:
        value = int(shard.state.get(key, b"0")) + 1
        return CoordinatorResult([(key, str(value).encode())], value)

    return operation


def test_a_keyed_write_waits_for_the_commit_of_the_earlier_write_of_its_key() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        first = rt.schedule_write(0, increment(b"g"), key="g")
        second = rt.schedule_write(0, increment(b"g"), key="g")
        other = rt.schedule_write(0, increment(b"h"), key="h")
        assert len(log.waiting) == 2  # g's first write and h's; g's second one waits
        log.settle(1)  # h commits first: g's second write still waits for g's first
        await settle_callbacks()
        assert len(log.waiting) == 2 and not second.done()
        log.settle(0)
        await settle_callbacks()
        assert first.result() == 1
        assert len(log.waiting) == 3  # computed from the committed 1
        log.settle(2)
        await settle_callbacks()
        assert second.result() == 2 and other.result() == 1
        assert value_of(rt, 0, b"g") == b"2"

    run(scenario())


def test_a_failed_write_leaves_the_next_write_of_its_key_the_state_before_it() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        first = rt.schedule_write(0, increment(b"g"), key="g")
        second = rt.schedule_write(0, increment(b"g"), key="g")
        log.settle(0, E.NOT_ENOUGH_REPLICAS)
        await settle_callbacks()
        with pytest.raises(CoordinatorError) as failed:
            first.result()
        assert failed.value.error_code == E.NOT_ENOUGH_REPLICAS
        assert log.logs[0][-1] == (b"g", b"1")  # recomputed from the state before the failure
        log.settle(1)
        await settle_callbacks()
        assert second.result() == 1 and value_of(rt, 0, b"g") == b"1"
        log.refuse = E.KAFKA_STORAGE_ERROR  # refused at append: the parked write runs next
        refused = rt.schedule_write(0, increment(b"g"), key="g")
        with pytest.raises(CoordinatorError) as failed:
            refused.result()
        assert failed.value.error_code == E.KAFKA_STORAGE_ERROR
        log.refuse = None
        third = rt.schedule_write(0, increment(b"g"), key="g")
        assert len(log.waiting) == 3  # the key is free: the refused write left nothing pending
        log.settle(2)
        await settle_callbacks()
        assert third.result() == 2

    run(scenario())


def test_unloading_fails_the_parked_writes() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        first = rt.schedule_write(0, increment(b"g"), key="g")
        parked = rt.schedule_write(0, increment(b"g"), key="g")
        rt.schedule_unload(0)
        await settle_callbacks()
        for future in (first, parked):
            with pytest.raises(CoordinatorError) as failed:
                future.result()
            assert failed.value.error_code == E.NOT_COORDINATOR
        assert len(log.waiting) == 1  # the parked write never ran

    run(scenario())


def test_a_timer_fires_as_a_keyed_write() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        pending = rt.schedule_write(0, increment(b"g"), key="g")
        timer = rt.read(0, lambda shard: shard.timer)
        timer.schedule("tick", 0, increment(b"g"), write_key="g")
        for _ in range(20):
            await asyncio.sleep(0.001)
            if not timer.is_scheduled("tick"):
                break
        await settle_callbacks()
        assert len(log.waiting) == 1  # the expiry waits for the pending write of g
        log.settle(0)
        await settle_callbacks()
        assert pending.result() == 1 and len(log.waiting) == 2
        assert log.logs[0][-1] == (b"g", b"2")

    run(scenario())


def read_of(key: bytes) -> Any:
    """A keyed operation that writes nothing: answered once the writes before it are."""

    def operation(shard: MapShard) -> CoordinatorResult[KV, bytes | None]:
        return CoordinatorResult((), shard.state.get(key))

    return operation


def test_parked_writes_that_complete_at_once_drain_without_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0)
        first = rt.schedule_write(0, put(b"g", b"1"), key="g")
        reads = [rt.schedule_write(0, read_of(b"g"), key="g") for _ in range(3)]
        log.settle(0)
        await settle_callbacks()
        assert first.result() == "ok"
        assert [r.result() for r in reads] == [b"1", b"1", b"1"]
        later = rt.schedule_write(0, read_of(b"g"), key="g")
        assert later.result() == b"1"

    with caplog.at_level(logging.ERROR):
        run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("error", [E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND])
def test_a_write_left_in_doubt_fails_the_shard_over_until_the_log_is_committed(
    error: int,
) -> None:
    """A commit that failed after the append leaves the records in the log, where they may
    still commit: the shard reloads once everything in the log is committed, so its state is
    the replay of the log, never of uncommitted records."""

    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0, 1)
        done = rt.schedule_write(0, put(b"j", b"1"))
        log.settle(0)
        assert await done == "ok"
        in_doubt = rt.schedule_write(0, put(b"k", b"late"))
        after = rt.schedule_write(0, put(b"j", b"2"))
        log.settle(1, error)
        with pytest.raises(CoordinatorError) as caught:
            await in_doubt
        assert caught.value.error_code == error
        with pytest.raises(CoordinatorError) as dropped:
            await after  # pending when the shard was failed over
        assert dropped.value.error_code == E.NOT_COORDINATOR
        assert rt.status(0) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert rt.partitions() == {0: (1, True)}
        await settle_callbacks()
        assert rt.status(0) == E.COORDINATOR_LOAD_IN_PROGRESS  # the log's tail is not committed
        (tail,) = log.log_end
        tail.set_result(E.NONE)
        await settle_callbacks()
        assert rt.status(0) == E.NONE
        assert value_of(rt, 0, b"k") == b"late" and value_of(rt, 0, b"j") == b"2"

    run(scenario())


def test_a_shard_failed_over_is_not_reloaded_when_leadership_moves_first() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log)
        rt.load_now(0, 1)
        in_doubt = rt.schedule_write(0, put(b"k", b"late"))
        log.settle(0, E.REQUEST_TIMED_OUT)
        with pytest.raises(CoordinatorError):
            await in_doubt
        await settle_callbacks()
        log.log_end[0].set_result(E.NOT_LEADER_OR_FOLLOWER)
        await settle_callbacks()
        assert rt.status(0) == E.NOT_COORDINATOR

    run(scenario())


def test_a_write_that_cannot_run_within_the_write_timeout_fails_and_never_runs() -> None:
    """No request waits on the runtime without a bound: a keyed write parked behind a write
    whose commit never reports (the log's wait lost) fails with REQUEST_TIMED_OUT once
    ``write_timeout_ms`` passed, and is not run later; the write that ran is left to its
    commit, which settles it (the log bounds it)."""

    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log, write_timeout_ms=50)
        rt.load_now(0)
        stuck = rt.schedule_write(0, increment(b"g"), key="g")
        parked = rt.schedule_write(0, increment(b"g"), key="g")
        with pytest.raises(CoordinatorError) as failed:
            await asyncio.wait_for(parked, 5)  # a generous bound that only catches a wedge
        assert failed.value.error_code == E.REQUEST_TIMED_OUT
        assert not stuck.done()  # it ran: its commit decides
        log.settle(0)
        assert await stuck == 1
        await settle_callbacks()
        assert len(log.waiting) == 1  # the timed-out write never ran
        after = rt.schedule_write(0, increment(b"g"), key="g")
        log.settle(1)
        assert await after == 2 and value_of(rt, 0, b"g") == b"2"

    run(scenario())


def test_a_write_answered_in_time_is_not_timed_out() -> None:
    async def scenario() -> None:
        log = MemoryPartitions()
        log.hold = True
        rt = make(log, write_timeout_ms=50)
        rt.load_now(0)
        first = rt.schedule_write(0, increment(b"g"), key="g")
        second = rt.schedule_write(0, increment(b"g"), key="g")
        log.settle(0)
        await settle_callbacks()
        await asyncio.sleep(0.1)  # past the timeout: the second write ran in time
        log.settle(1)
        assert await first == 1 and await second == 2

    run(scenario())
