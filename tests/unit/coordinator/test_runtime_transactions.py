"""CoordinatorRuntime's opt-in transactional writes over an in-memory partition.

A transactional shard keeps the records of each producer's open transaction aside until the
replay of its marker applies them (COMMIT) or drops them (ABORT). The partition stores
batches (producer id and epoch, transactional flag, marker), appends commit at once or when
the test settles them, and a load replays it batch by batch: a reloaded shard must equal the
live one. A shard or a log that does not opt in is written and loaded as before, and refuses
transactional writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import (
    CoordinatorBatch,
    CoordinatorError,
    CoordinatorRecord,
    CoordinatorResult,
    CoordinatorWriteError,
    TransactionResult,
)
from pydmq.coordinator.runtime import CoordinatorRuntime
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import Record

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
KV = tuple[bytes, bytes | None]


class TxnMapShard:
    """Latest value per key; a transaction's records wait for its marker."""

    def __init__(self, partition: int, timer: CoordinatorTimer[TxnMapShard]) -> None:
        self.state: dict[bytes, bytes | None] = {}
        self.open: dict[int, list[KV]] = {}
        self.markers: list[tuple[int, int, TransactionResult]] = []

    def replay(self, record: KV) -> None:
        self.state[record[0]] = record[1]

    def replay_transactional(self, record: KV, producer_id: int, producer_epoch: int) -> None:
        self.open.setdefault(producer_id, []).append(record)

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: TransactionResult
    ) -> None:
        self.markers.append((producer_id, producer_epoch, result))
        for record in self.open.pop(producer_id, []):
            if result is TransactionResult.COMMIT:
                self.replay(record)

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        pass

    def snapshot(self) -> tuple[object, ...]:
        return (dict(self.state), {p: list(r) for p, r in self.open.items()}, list(self.markers))


class PlainShard:
    """A shard that does not opt in (no transactional replay methods)."""

    def __init__(self, partition: int, timer: CoordinatorTimer[PlainShard]) -> None:
        self.state: dict[bytes, bytes | None] = {}

    def replay(self, record: KV) -> None:
        self.state[record[0]] = record[1]

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        pass


class Serde:
    def serialize(self, record: KV) -> CoordinatorRecord:
        return record

    def deserialize(self, key: bytes | None, value: bytes | None) -> KV | None:
        return None if key is None else (key, value)


class TxnPartitions:
    """Batches in memory. With ``hold``, appends wait for :meth:`settle`."""

    def __init__(self) -> None:
        self.batches: list[CoordinatorBatch] = []
        self.hold = False
        self.refuse: int | None = None
        self.waiting: list[asyncio.Future[int]] = []

    def _stored(self, batch: CoordinatorBatch) -> asyncio.Future[int] | None:
        if self.refuse is not None:
            raise CoordinatorWriteError(self.refuse)
        self.batches.append(batch)
        if not self.hold:
            return None
        self.waiting.append(asyncio.get_running_loop().create_future())
        return self.waiting[-1]

    def _records(self, records: Sequence[CoordinatorRecord]) -> list[Record]:
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
        for batch in list(self.batches):
            if batch.end_txn is None:
                yield from batch.records

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        return None


def put(key: bytes, value: bytes) -> Any:
    def operation(shard: TxnMapShard) -> CoordinatorResult[KV, str]:
        return CoordinatorResult([(key, value)], "ok")

    return operation


def make(log: TxnPartitions, shard: Any = TxnMapShard) -> CoordinatorRuntime[Any, KV]:
    return CoordinatorRuntime("__state", log, Serde(), shard)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 10))


def shard_of(runtime: CoordinatorRuntime[Any, KV]) -> Any:
    return runtime.read(0, lambda s: s)


def test_commit_applies_the_transaction_abort_drops_it() -> None:
    async def scenario() -> None:
        log = TxnPartitions()
        runtime = make(log)
        runtime.load_now(0)
        assert await runtime.schedule_transactional_write(0, 7, 1, put(b"a", b"1")) == "ok"
        assert await runtime.schedule_transactional_write(0, 8, 0, put(b"b", b"2")) == "ok"
        await runtime.schedule_write(0, put(b"c", b"3"))
        shard = shard_of(runtime)
        assert shard.state == {b"c": b"3"}  # the transactions are open
        assert shard.open == {7: [(b"a", b"1")], 8: [(b"b", b"2")]}
        await runtime.schedule_transaction_completion(0, 7, 1, 5, TransactionResult.COMMIT)
        await runtime.schedule_transaction_completion(0, 8, 0, 5, TransactionResult.ABORT)
        assert shard.state == {b"a": b"1", b"c": b"3"} and shard.open == {}
        assert [(b.producer_id, b.is_transactional, b.end_txn) for b in log.batches] == [
            (7, True, None),
            (8, True, None),
            (-1, False, None),
            (7, True, TransactionResult.COMMIT),
            (8, True, TransactionResult.ABORT),
        ]

    run(scenario())


def test_reload_gives_the_live_state() -> None:
    async def scenario() -> None:
        log = TxnPartitions()
        live = make(log)
        live.load_now(0)
        await live.schedule_transactional_write(0, 7, 1, put(b"a", b"1"))
        await live.schedule_transactional_write(0, 9, 0, put(b"b", b"2"))  # stays open
        await live.schedule_transaction_completion(0, 7, 1, 0, TransactionResult.COMMIT)
        await live.schedule_transactional_write(0, 7, 1, put(b"a", b"x"))
        await live.schedule_transaction_completion(0, 7, 1, 0, TransactionResult.ABORT)
        reloaded = make(log)
        reloaded.load_now(0)
        assert shard_of(reloaded).snapshot() == shard_of(live).snapshot()
        assert shard_of(reloaded).state == {b"a": b"1"}
        assert shard_of(reloaded).open == {9: [(b"b", b"2")]}
        background = make(log)  # the background load (an election) replays the same
        task = background.schedule_load(0, 1)
        assert task is not None
        await task
        assert shard_of(background).snapshot() == shard_of(live).snapshot()

    run(scenario())


def test_a_marker_waits_for_its_commit_and_follows_append_order() -> None:
    async def scenario() -> None:
        log = TxnPartitions()
        runtime = make(log)
        runtime.load_now(0)
        log.hold = True
        write = runtime.schedule_transactional_write(0, 7, 1, put(b"a", b"1"))
        done = runtime.schedule_transaction_completion(0, 7, 1, 0, TransactionResult.COMMIT)
        shard = shard_of(runtime)
        log.waiting[1].set_result(E.NONE)  # the marker commits first: still behind the write
        await asyncio.sleep(0)
        assert not done.done() and shard.state == {}
        log.waiting[0].set_result(E.NONE)
        await asyncio.wait_for(done, 5)
        assert write.result() == "ok" and shard.state == {b"a": b"1"}

    run(scenario())


def test_a_refused_marker_fails_with_the_produce_error_and_changes_nothing() -> None:
    async def scenario() -> None:
        log = TxnPartitions()
        runtime = make(log)
        runtime.load_now(0)
        await runtime.schedule_transactional_write(0, 7, 1, put(b"a", b"1"))
        log.refuse = E.INVALID_PRODUCER_EPOCH
        with pytest.raises(CoordinatorError) as refused:
            await runtime.schedule_transaction_completion(0, 7, 0, 0, TransactionResult.COMMIT)
        assert refused.value.error_code == E.INVALID_PRODUCER_EPOCH
        assert shard_of(runtime).open == {7: [(b"a", b"1")]}
        log.refuse = None
        with pytest.raises(CoordinatorError) as elsewhere:
            await runtime.schedule_transaction_completion(3, 7, 1, 0, TransactionResult.COMMIT)
        assert elsewhere.value.error_code == E.NOT_COORDINATOR

    run(scenario())


def test_a_shard_that_does_not_opt_in_refuses_transactional_writes() -> None:
    async def scenario() -> None:
        log = TxnPartitions()
        runtime = make(log, PlainShard)
        runtime.load_now(0)
        with pytest.raises(CoordinatorError) as refused:
            await runtime.schedule_transactional_write(0, 7, 1, put(b"a", b"1"))
        assert refused.value.error_code == E.COORDINATOR_NOT_AVAILABLE
        with pytest.raises(CoordinatorError):
            await runtime.schedule_transaction_completion(0, 7, 1, 0, TransactionResult.COMMIT)
        assert log.batches == []
        await runtime.schedule_write(0, put(b"c", b"3"))  # plain writes as before
        assert shard_of(runtime).state == {b"c": b"3"}

    run(scenario())


def test_a_write_left_in_doubt_is_reloaded_from_the_batches() -> None:
    """A transactional write whose commit timed out stays in the log: the shard is failed
    over and reloaded batch by batch, so the open transaction shows (and can still end)."""

    async def scenario() -> None:
        log = TxnPartitions()
        runtime = make(log)
        runtime.load_now(0)
        log.hold = True
        write = runtime.schedule_transactional_write(0, 7, 1, put(b"a", b"1"))
        log.waiting[0].set_result(E.REQUEST_TIMED_OUT)
        with pytest.raises(CoordinatorError) as timed_out:
            await write
        assert timed_out.value.error_code == E.REQUEST_TIMED_OUT
        for _ in range(100):  # the fail-over's reload, a task of the loop
            if runtime.status(0) == E.NONE:
                break
            await asyncio.sleep(0)
        assert runtime.status(0) == E.NONE  # reloaded (the log end is committed)
        assert shard_of(runtime).open == {7: [(b"a", b"1")]}
        log.hold = False
        await runtime.schedule_transaction_completion(0, 7, 1, 0, TransactionResult.COMMIT)
        assert shard_of(runtime).state == {b"a": b"1"}

    run(scenario())
