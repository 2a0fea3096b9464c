"""The transaction coordinator on the coordinator runtime, over an in-memory
``__transaction_state``, a fake marker receiver and a clock the tests move: the state machine
and the errors of each API as Kafka 4.x answers them, markers and their retries, recovery of a
transaction left in Prepare, timeouts and expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

import pytest

from pydmq.coordinator.api import CoordinatorRecord
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.protocol.records import Record
from pydmq.storage.api import TopicPartition
from pydmq.transactions import generated_records as gen
from pydmq.transactions.api import TransactionConfig
from pydmq.transactions.coordinator import TransactionCoordinator
from pydmq.transactions.log import transactional_id_partition
from pydmq.transactions.markers import NO_LEADER, TransactionMarkerChannel
from pydmq.transactions.metadata import TransactionState

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


class MemoryStateLog:
    """``__transaction_state`` in memory: appends commit at once."""

    num_partitions = 4
    exists = True

    def __init__(self) -> None:
        self.logs: dict[int, list[CoordinatorRecord]] = {}

    def partition_for(self, transactional_id: str) -> int:
        return transactional_id_partition(transactional_id, self.num_partitions)

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        self.logs.setdefault(partition, []).extend(records)
        return None

    def replay_partition(self, partition: int) -> Iterator[Record]:
        for offset, (key, value) in enumerate(list(self.logs.get(partition, []))):
            yield Record(offset, 0, key, value, ())

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        return None

    def values(self, transactional_id: str) -> list[gen.TransactionLogValue | None]:
        out: list[gen.TransactionLogValue | None] = []
        for key, value in self.logs.get(self.partition_for(transactional_id), []):
            if gen.decode_key(key).transactional_id == transactional_id:
                out.append(None if value is None else gen.decode_transaction_log_value(value))
        return out


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    def generate_producer_id(self) -> int:
        self.next += 1
        return self.next - 1


class Leaders:
    def __init__(self) -> None:
        self.leaders: dict[TopicPartition, int] = {}

    def leader_of(self, tp: TopicPartition) -> int | None:
        if tp.topic == "__consumer_offsets":
            return 1
        return self.leaders.get(tp, 1 if tp.topic == "t" else None)


class Receiver:
    """The partition leaders' side of WriteTxnMarkers: records each request and answers the
    next programmed error per partition (NONE once none is left); ``hold`` parks requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, WriteTxnMarkersRequest]] = []
        self.errors: dict[TopicPartition, list[int]] = {}
        self.fail_next = 0
        self.hold: asyncio.Event | None = None

    async def send(
        self, broker_id: int, version: int, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        self.requests.append((broker_id, version, request))
        if self.hold is not None:
            await self.hold.wait()
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("connection refused")
        results = []
        for marker in request.markers:
            topics = []
            for topic in marker.topics:
                parts = []
                for index in topic.partition_indexes:
                    queue = self.errors.get(TopicPartition(topic.name, index), [])
                    code = queue.pop(0) if queue else E.NONE
                    parts.append(
                        WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
                    )
                topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=parts))
            results.append(WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics))
        return WriteTxnMarkersResponse(markers=results)


class Harness:
    def __init__(
        self, log: MemoryStateLog | None = None, *, ids: Any = None, **config: Any
    ) -> None:
        self.log = log or MemoryStateLog()
        self.ids = ids if ids is not None else Ids()
        self.leaders = Leaders()
        self.receiver = Receiver()
        self.now = 1_000_000
        self.channel = TransactionMarkerChannel(
            self.leaders, self.receiver, retry_backoff_ms=1, max_backoff_ms=2
        )
        self.coordinator = TransactionCoordinator(
            TransactionConfig(**config),
            self.log,
            self.ids,
            self.channel,
            lambda group: 7,
            owns_all_partitions=True,
            clock=lambda: self.now,
        )

    def start(self) -> None:
        self.coordinator.load()
        self.coordinator.start()

    def state(self, transactional_id: str) -> Any:
        return self.coordinator.describe(transactional_id)

    async def settled(self, transactional_id: str, state: str) -> None:
        """Wait (bounded) until the id reaches ``state``."""
        for _ in range(2000):
            if self.state(transactional_id).state == state:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{transactional_id}: {self.state(transactional_id)}")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_new_id_gets_a_producer_id_and_each_init_bumps_the_epoch() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        first = await h.coordinator.init_producer_id("a", 60000)
        assert (first.error_code, first.producer_id, first.producer_epoch) == (E.NONE, 1000, 0)
        second = await h.coordinator.init_producer_id("a", 30000)
        assert (second.producer_id, second.producer_epoch) == (1000, 1)
        [v0, v1] = h.log.values("a")
        assert v0 is not None and v1 is not None
        assert v1.transaction_status == TransactionState.EMPTY
        assert v1.transaction_timeout_ms == 30000 and v1.transaction_partitions is None
        assert h.state("a").state == "Empty"

    run(scenario())


def test_init_errors() -> None:
    async def scenario() -> None:
        h = Harness(max_timeout_ms=1000)
        h.start()
        c = h.coordinator
        assert (await c.init_producer_id("a", 1001)).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("a", 0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("", 100)).error_code == E.INVALID_REQUEST
        assert h.log.logs == {}

    run(scenario())


def test_add_partitions_checks_the_producer_then_starts_the_transaction() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        assert await c.add_partitions("a", 1000, 0, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
        init = await c.init_producer_id("a", 60000)
        assert await c.add_partitions("a", 999, 0, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions("a", init.producer_id, 1, [TP0]) == E.PRODUCER_FENCED
        h.now += 5
        assert await c.add_partitions("a", init.producer_id, 0, [TP0]) == E.NONE
        h.now += 5
        assert await c.add_partitions("a", init.producer_id, 0, [TP1]) == E.NONE
        described = h.state("a")
        assert described.state == "Ongoing"
        assert described.partitions == (TP0, TP1)
        assert described.start_timestamp == 1_000_005
        written = len(h.log.values("a"))
        assert await c.add_partitions("a", init.producer_id, 0, [TP0]) == E.NONE
        assert len(h.log.values("a")) == written  # nothing new: no record
        assert await c.add_offsets("a", init.producer_id, 0, "g") == E.NONE
        assert TopicPartition("__consumer_offsets", 7) in h.state("a").partitions

    run(scenario())


def test_commit_sends_markers_then_completes() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        init = await c.init_producer_id("a", 60000)
        await c.add_partitions("a", init.producer_id, 0, [TP0, TP1])
        h.receiver.hold = asyncio.Event()
        end = await c.end_transaction("a", init.producer_id, 0, True)
        assert end.error_code == E.NONE
        assert (end.producer_id, end.producer_epoch) == (init.producer_id, 0)  # v1: no bump
        assert h.state("a").state == "PrepareCommit"
        # while the markers are in flight
        assert (await c.end_transaction("a", 1000, 0, True)).error_code == (
            E.CONCURRENT_TRANSACTIONS
        )
        assert (await c.end_transaction("a", 1000, 0, False)).error_code == E.INVALID_TXN_STATE
        assert await c.add_partitions("a", 1000, 0, [TP0]) == E.CONCURRENT_TRANSACTIONS
        assert (await c.init_producer_id("a", 60000)).error_code == E.CONCURRENT_TRANSACTIONS
        h.receiver.hold.set()
        await h.settled("a", "CompleteCommit")
        [(broker, version, request)] = h.receiver.requests
        assert (broker, version) == (1, 1)
        [marker] = request.markers
        assert (marker.producer_id, marker.producer_epoch) == (1000, 0)
        assert marker.transaction_result is True
        assert marker.coordinator_epoch == 0
        assert [(t.name, t.partition_indexes) for t in marker.topics] == [("t", [0, 1])]
        assert h.state("a").partitions == ()
        assert (await c.end_transaction("a", 1000, 0, True)).error_code == E.NONE  # a retry
        assert (await c.end_transaction("a", 1000, 0, False)).error_code == E.INVALID_TXN_STATE
        assert (await c.end_transaction("a", 1000, 0, True)).producer_epoch == 0
        statuses = [v.transaction_status for v in h.log.values("a") if v is not None]
        assert statuses[-2:] == [TransactionState.PREPARE_COMMIT, TransactionState.COMPLETE_COMMIT]
        # a new transaction after the commit
        assert await c.add_partitions("a", 1000, 0, [TP1]) == E.NONE
        assert (await c.end_transaction("a", 1000, 0, False)).error_code == E.NONE
        await h.settled("a", "CompleteAbort")

    run(scenario())


def test_end_txn_errors() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        assert (await c.end_transaction("a", 1, 0, True)).error_code == (
            E.INVALID_PRODUCER_ID_MAPPING
        )
        init = await c.init_producer_id("a", 60000)
        assert (await c.end_transaction("a", init.producer_id, 0, True)).error_code == (
            E.INVALID_TXN_STATE  # Empty: nothing to end
        )
        await c.add_partitions("a", init.producer_id, 0, [TP0])
        assert (await c.end_transaction("a", init.producer_id, 3, True)).error_code == (
            E.PRODUCER_FENCED
        )
        assert (await c.end_transaction("", init.producer_id, 0, True)).error_code == (
            E.INVALID_REQUEST
        )

    run(scenario())


def test_init_during_a_transaction_fences_and_aborts_it_first() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        init = await c.init_producer_id("a", 60000)
        await c.add_partitions("a", init.producer_id, 0, [TP0])
        h.receiver.hold = asyncio.Event()
        again = await c.init_producer_id("a", 60000)
        assert again.error_code == E.CONCURRENT_TRANSACTIONS
        described = h.state("a")
        assert (described.state, described.producer_epoch) == ("PrepareAbort", 1)
        # the zombie producer is fenced
        assert await c.add_partitions("a", init.producer_id, 0, [TP0]) == E.PRODUCER_FENCED
        h.receiver.hold.set()
        await h.settled("a", "CompleteAbort")
        [marker] = h.receiver.requests[0][2].markers
        assert (marker.producer_epoch, marker.transaction_result) == (1, False)
        final = await c.init_producer_id("a", 60000)
        assert (final.error_code, final.producer_id, final.producer_epoch) == (E.NONE, 1000, 2)

    run(scenario())


def test_kip360_epoch_bump_with_the_callers_producer_id_and_epoch() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        bumped = await c.init_producer_id("a", 60000, 1000, 0)
        assert (bumped.error_code, bumped.producer_epoch) == (E.NONE, 1)
        retried = await c.init_producer_id("a", 60000, 1000, 0)  # the answer was lost
        assert (retried.error_code, retried.producer_epoch) == (E.NONE, 1)
        assert (await c.init_producer_id("a", 60000, 1000, 5)).error_code == E.PRODUCER_FENCED
        assert (await c.init_producer_id("a", 60000, 77, 1)).error_code == E.PRODUCER_FENCED
        # a new id with a producer id and epoch (recovering from UNKNOWN_PRODUCER_ID)
        fresh = await c.init_producer_id("b", 60000, 55, 3)
        assert (fresh.error_code, fresh.producer_epoch) == (E.NONE, 0)

    run(scenario())


def test_an_exhausted_epoch_takes_a_new_producer_id() -> None:
    async def scenario() -> None:
        log = MemoryStateLog()
        h = Harness(log)
        for tid, pid in (("a", 500), ("b", 600)):
            key = gen.TransactionLogKey(tid).encode()
            value = gen.TransactionLogValue(pid, 32766, 60000, 0, None, 1, -1).encode(0)
            log.logs.setdefault(log.partition_for(tid), []).append((key, value))
        h.start()
        rotated = await h.coordinator.init_producer_id("a", 60000)
        assert (rotated.error_code, rotated.producer_id, rotated.producer_epoch) == (
            E.NONE,
            1000,
            0,
        )
        assert log.values("a")[-1] is not None
        # KIP-360: the bump that rotates, then its retry (the answer was lost) with the old
        # producer id and its exhausted epoch
        first = await h.coordinator.init_producer_id("b", 60000, 600, 32766)
        retry = await h.coordinator.init_producer_id("b", 60000, 600, 32766)
        assert (first.error_code, first.producer_id, first.producer_epoch) == (E.NONE, 1001, 0)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (E.NONE, 1001, 0)

    run(scenario())


def test_markers_are_retried_and_deleted_partitions_dropped() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        h.leaders.leaders[TP1] = 2
        gone = TopicPartition("gone", 0)
        h.leaders.leaders[gone] = 3
        await c.init_producer_id("a", 60000)
        await c.add_partitions("a", 1000, 0, [TP0, TP1, gone])
        h.receiver.errors[TP0] = [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS]
        h.receiver.errors[gone] = [E.UNKNOWN_TOPIC_OR_PARTITION]
        h.receiver.fail_next = 1
        await c.end_transaction("a", 1000, 0, True)
        for _ in range(50):
            await asyncio.sleep(0.002)
            if len(h.receiver.requests) >= 3:
                break
        del h.leaders.leaders[gone]  # deleted meanwhile
        h.leaders.leaders[TP1] = NO_LEADER  # no leader for a while
        await asyncio.sleep(0.01)
        h.leaders.leaders[TP1] = 2
        await h.settled("a", "CompleteCommit")
        sent_to = {broker for broker, _, _ in h.receiver.requests}
        assert sent_to == {1, 2, 3}
        # one request per broker and round: partitions of one broker in one request
        for _, _, request in h.receiver.requests:
            [marker] = request.markers
            names = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            assert len(names) == len(set(names))

    run(scenario())


def test_a_stale_coordinator_abandons_the_markers() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        await c.add_partitions("a", 1000, 0, [TP0])
        h.receiver.errors[TP0] = [E.TRANSACTION_COORDINATOR_FENCED]
        await c.end_transaction("a", 1000, 0, False)
        for _ in range(2000):
            if not h.channel.in_flight("a"):
                break
            await asyncio.sleep(0.001)
        assert h.state("a").state == "PrepareAbort"
        assert not h.channel.in_flight("a")

    run(scenario())


def test_a_prepare_commit_in_the_log_resumes_its_markers_at_load() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        await h.coordinator.init_producer_id("a", 60000)
        await h.coordinator.add_partitions("a", 1000, 0, [TP0])
        h.receiver.hold = asyncio.Event()
        await h.coordinator.end_transaction("a", 1000, 0, True)
        h.coordinator.stop()  # the node stops before any marker was answered
        restarted = Harness(h.log)
        restarted.start()
        assert restarted.state("a").state == "PrepareCommit"
        await restarted.settled("a", "CompleteCommit")
        [(_, _, request)] = restarted.receiver.requests
        assert request.markers[0].transaction_result is True

    run(scenario())


def test_a_timed_out_transaction_is_fenced_and_aborted() -> None:
    async def scenario() -> None:
        h = Harness(abort_timed_out_interval_ms=5)
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 1000)
        await c.add_partitions("a", 1000, 0, [TP0])
        await c.init_producer_id("b", 60000)
        await c.add_partitions("b", 1001, 0, [TP1])
        h.now += 1001
        await h.settled("a", "CompleteAbort")
        assert h.state("a").producer_epoch == 1  # the zombie is fenced
        assert h.state("b").state == "Ongoing"  # not timed out
        assert (await c.end_transaction("a", 1000, 0, True)).error_code == E.PRODUCER_FENCED

    run(scenario())


def test_idle_ids_expire_with_a_tombstone() -> None:
    async def scenario() -> None:
        h = Harness(id_expiration_ms=100, remove_expired_interval_ms=5)
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        await c.init_producer_id("b", 60000)
        await c.add_partitions("b", 1001, 0, [TP0])
        h.now += 101
        for _ in range(2000):
            if c.describe("a").error_code:
                break
            await asyncio.sleep(0.001)
        assert c.describe("a").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert h.log.values("a")[-1] is None
        assert c.describe("b").state == "Ongoing"  # a transaction in progress never expires
        again = await c.init_producer_id("a", 60000)
        assert (again.producer_id, again.producer_epoch) == (1002, 0)

    run(scenario())


def test_describe_and_list() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        await c.init_producer_id("b", 50000)
        await c.add_partitions("b", 1001, 0, [TP0])
        assert c.describe("zzz").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        b = c.describe("b")
        assert (b.state, b.timeout_ms, b.producer_id, b.partitions) == (
            "Ongoing",
            50000,
            1001,
            (TP0,),
        )
        error, unknown, listed = c.list_transactions([], [])
        assert error == E.NONE and unknown == []
        assert sorted((t.transactional_id, t.state) for t in listed) == [
            ("a", "Empty"),
            ("b", "Ongoing"),
        ]
        _, unknown, listed = c.list_transactions(["Ongoing", "Bogus"], [])
        assert unknown == ["Bogus"] and [t.transactional_id for t in listed] == ["b"]
        _, _, listed = c.list_transactions([], [1000])
        assert [t.transactional_id for t in listed] == ["a"]
        h.now += 10
        # running longer than 5 ms; as Kafka, an id without a transaction (start -1) passes
        _, _, listed = c.list_transactions([], [], 5)
        assert sorted(t.transactional_id for t in listed) == ["a", "b"]
        _, _, listed = c.list_transactions(["Ongoing"], [], 10)
        assert listed == []
        # KIP-1152: an RE2/J pattern matching the whole id; null or empty: no filter
        _, _, listed = c.list_transactions([], [], -1, "b|c")
        assert [t.transactional_id for t in listed] == ["b"]
        _, _, listed = c.list_transactions([], [], -1, "")
        assert len(listed) == 2
        assert c.list_transactions([], [], -1, "(?<=a)")[0] == E.INVALID_REGULAR_EXPRESSION

    run(scenario())


def test_verify_only() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        await c.add_partitions("a", 1000, 0, [TP0])
        assert c.verify_partitions("a", 1000, 0, [TP0, TP1]) == {
            TP0: E.NONE,
            TP1: E.INVALID_TXN_STATE,
        }
        assert c.verify_partitions("a", 1000, 1, [TP0]) == {TP0: E.PRODUCER_FENCED}
        assert c.verify_partitions("x", 1000, 0, [TP0]) == {TP0: E.INVALID_PRODUCER_ID_MAPPING}

    run(scenario())


def test_end_txn_v2_bumps_the_epoch_and_writes_the_flexible_value() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        await c.add_partitions("a", 1000, 0, [TP0])
        end = await c.end_transaction("a", 1000, 0, True, transaction_version=2)
        assert (end.error_code, end.producer_id, end.producer_epoch) == (E.NONE, 1000, 1)
        await h.settled("a", "CompleteCommit")
        [marker] = h.receiver.requests[0][2].markers
        assert (marker.producer_epoch, marker.transaction_version) == (1, 2)
        assert h.receiver.requests[0][1] == 2
        last = h.log.values("a")[-1]
        assert last is not None and last.client_transaction_version == 2
        # a retry with the epoch before the bump answers the bumped epoch
        retry = await c.end_transaction("a", 1000, 0, True, transaction_version=2)
        assert (retry.error_code, retry.producer_epoch) == (E.NONE, 1)
        # the records replay into the same state at load
        restarted = Harness(h.log)
        restarted.start()
        assert restarted.state("a") == h.state("a")

    run(scenario())


def test_end_txn_v2_moves_an_exhausted_epoch_to_a_new_producer_id() -> None:
    async def scenario() -> None:
        log = MemoryStateLog()
        h = Harness(log)
        key = gen.TransactionLogKey("a").encode()
        partitions = (gen.PartitionsSchema("t", (0,)),)
        ongoing = gen.TransactionLogValue(500, 32766, 60000, 1, partitions, 5, 1, 2)
        log.logs[log.partition_for("a")] = [(key, ongoing.encode(1))]
        h.start()
        c = h.coordinator
        end = await c.end_transaction("a", 500, 32766, True, transaction_version=2)
        assert (end.error_code, end.producer_id, end.producer_epoch) == (E.NONE, 1000, 0)
        await h.settled("a", "CompleteCommit")
        [marker] = h.receiver.requests[0][2].markers
        assert (marker.producer_id, marker.producer_epoch) == (500, 32767)
        described = h.state("a")
        assert (described.producer_id, described.producer_epoch) == (1000, 0)
        last = log.values("a")[-1]
        assert last is not None and (last.previous_producer_id, last.next_producer_id) == (500, -1)
        retry = await c.end_transaction("a", 500, 32766, True, transaction_version=2)
        assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (E.NONE, 1000, 0)
        assert await c.add_partitions("a", 1000, 0, [TP0]) == E.NONE

    run(scenario())


def test_markers_queued_for_a_broker_share_its_next_request() -> None:
    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        for index, name in enumerate(("a", "b", "c")):
            await c.init_producer_id(name, 60000)
            await c.add_partitions(name, 1000 + index, 0, [TopicPartition("t", index % 2)])
        h.receiver.hold = asyncio.Event()
        await c.end_transaction("a", 1000, 0, True)
        for _ in range(2000):
            if h.receiver.requests:
                break
            await asyncio.sleep(0.001)
        await c.end_transaction("b", 1001, 0, True)  # queued behind a's request
        await c.end_transaction("c", 1002, 0, False)
        h.receiver.hold.set()
        for name in ("a", "b"):
            await h.settled(name, "CompleteCommit")
        await h.settled("c", "CompleteAbort")
        batches = [[m.producer_id for m in r.markers] for _, _, r in h.receiver.requests]
        assert batches == [[1000], [1001, 1002]]

    run(scenario())


def test_no_producer_id_block_answers_the_block_error() -> None:
    from pydmq.producers.id_manager import ProducerIdBlockError

    class NoBlock:
        def generate_producer_id(self) -> int:
            raise ProducerIdBlockError("no block")

    async def scenario() -> None:
        h = Harness(ids=NoBlock())
        h.start()
        answer = await h.coordinator.init_producer_id("a", 60000)
        assert answer.error_code == E.COORDINATOR_NOT_AVAILABLE
        assert h.log.logs == {}

    run(scenario())


def test_transactions_v2_partitions_added_by_their_leaders_one_epoch_per_transaction() -> None:
    """KIP-890 part 2: a leader adds a produce's partition (transaction_version 2), which
    records the client's version; every EndTxn bumps the epoch, the markers carry it and the
    next transaction is added at it; the previous epoch is fenced."""

    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        for epoch in range(3):
            assert await c.add_partitions("a", 1000, epoch, [TP0], transaction_version=2) == 0
            added = h.log.values("a")[-1]
            assert added is not None and added.client_transaction_version == 2
            end = await c.end_transaction("a", 1000, epoch, epoch != 1, transaction_version=2)
            assert (end.error_code, end.producer_id, end.producer_epoch) == (0, 1000, epoch + 1)
            await h.settled("a", "CompleteAbort" if epoch == 1 else "CompleteCommit")
            marker = h.receiver.requests[-1][2].markers[0]
            assert (marker.producer_epoch, marker.transaction_version) == (epoch + 1, 2)
        zombie = await c.add_partitions("a", 1000, 2, [TP1], transaction_version=2)
        assert zombie == E.PRODUCER_FENCED
        assert c.verify_partitions("a", 1000, 2, [TP1]) == {TP1: E.PRODUCER_FENCED}

    run(scenario())


def test_transactions_v2_a_rotated_producer_waits_for_the_rotation() -> None:
    """An EndTxn at an exhausted epoch answers the next producer id; a produce of it added
    while the markers are still written is told CONCURRENT_TRANSACTIONS (retried), not
    INVALID_PRODUCER_ID_MAPPING, and is added once the rotation completed."""

    async def scenario() -> None:
        log = MemoryStateLog()
        h = Harness(log)
        key = gen.TransactionLogKey("a").encode()
        partitions = (gen.PartitionsSchema("t", (0,)),)
        ongoing = gen.TransactionLogValue(500, 32766, 60000, 1, partitions, 5, 1, 2)
        log.logs[log.partition_for("a")] = [(key, ongoing.encode(1))]
        h.start()
        c = h.coordinator
        h.receiver.hold = asyncio.Event()
        end = await c.end_transaction("a", 500, 32766, True, transaction_version=2)
        assert (end.error_code, end.producer_id, end.producer_epoch) == (E.NONE, 1000, 0)
        assert h.state("a").state == "PrepareCommit"
        early = await c.add_partitions("a", 1000, 0, [TP0], transaction_version=2)
        assert early == E.CONCURRENT_TRANSACTIONS
        assert c.verify_partitions("a", 1000, 0, [TP0]) == {TP0: E.CONCURRENT_TRANSACTIONS}
        h.receiver.hold.set()
        await h.settled("a", "CompleteCommit")
        assert await c.add_partitions("a", 1000, 0, [TP0], transaction_version=2) == E.NONE
        assert (h.state("a").producer_id, h.state("a").state) == (1000, "Ongoing")

    run(scenario())


def test_transactions_v2_aborting_a_transaction_that_added_nothing_bumps_the_epoch() -> None:
    """franz-go's TestTxnEtl on transactions v2: the client commits (EndTxn v5 answers epoch
    1), begins the next transaction, whose produces were all refused (CONCURRENT_TRANSACTIONS
    while the commit's markers were written), and aborts it at epoch 1: Kafka's TV2
    endTransaction takes that abort from CompleteCommit (PrepareAbort at epoch 2, no marker to
    write), where pydmq answered INVALID_TXN_STATE, fatal to the producer. A retry of that
    abort answers its epoch; a commit of nothing at the current epoch is INVALID_TXN_STATE."""

    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        assert await c.add_partitions("a", 1000, 0, [TP0], transaction_version=2) == 0
        end = await c.end_transaction("a", 1000, 0, True, transaction_version=2)
        assert (end.error_code, end.producer_epoch) == (E.NONE, 1)
        await h.settled("a", "CompleteCommit")
        markers_sent = len(h.receiver.requests)
        h.now += 5
        abort = await c.end_transaction("a", 1000, 1, False, transaction_version=2)
        assert (abort.error_code, abort.producer_id, abort.producer_epoch) == (E.NONE, 1000, 2)
        await h.settled("a", "CompleteAbort")
        assert len(h.receiver.requests) == markers_sent  # no partition, no marker
        assert (h.state("a").producer_epoch, h.state("a").partitions) == (2, ())
        retry = await c.end_transaction("a", 1000, 1, False, transaction_version=2)
        assert (retry.error_code, retry.producer_epoch) == (E.NONE, 2)
        # again from CompleteAbort, then a commit of nothing
        again = await c.end_transaction("a", 1000, 2, False, transaction_version=2)
        assert (again.error_code, again.producer_epoch) == (E.NONE, 3)
        await h.settled("a", "CompleteAbort")
        nothing = await c.end_transaction("a", 1000, 3, True, transaction_version=2)
        assert nothing.error_code == E.INVALID_TXN_STATE
        # transactions v1 keeps Kafka's v1 answers: an abort of a completed commit is invalid
        await c.init_producer_id("b", 60000)
        assert await c.add_partitions("b", 1001, 0, [TP0]) == 0
        assert (await c.end_transaction("b", 1001, 0, True)).error_code == E.NONE
        await h.settled("b", "CompleteCommit")
        assert (await c.end_transaction("b", 1001, 0, False)).error_code == E.INVALID_TXN_STATE
        assert (await c.end_transaction("b", 1001, 0, True)).error_code == E.NONE

    run(scenario())


def test_transactions_v2_the_next_end_txn_waits_for_the_previous_markers() -> None:
    """The other TestTxnEtl failure: the next transaction's EndTxn (at the epoch the previous
    EndTxn answered) arrives while the previous transaction's markers are still written
    (PrepareCommit): CONCURRENT_TRANSACTIONS, which the client retries, not INVALID_TXN_STATE;
    once the commit completed the abort goes through. A retry of the previous EndTxn itself
    still answers CONCURRENT_TRANSACTIONS, and the other result INVALID_TXN_STATE."""

    async def scenario() -> None:
        h = Harness()
        h.start()
        c = h.coordinator
        await c.init_producer_id("a", 60000)
        assert await c.add_partitions("a", 1000, 0, [TP0], transaction_version=2) == 0
        h.receiver.hold = asyncio.Event()
        end = await c.end_transaction("a", 1000, 0, True, transaction_version=2)
        assert (end.error_code, end.producer_epoch) == (E.NONE, 1)
        assert h.state("a").state == "PrepareCommit"
        early = await c.end_transaction("a", 1000, 1, False, transaction_version=2)
        assert early.error_code == E.CONCURRENT_TRANSACTIONS
        retry = await c.end_transaction("a", 1000, 0, True, transaction_version=2)
        assert retry.error_code == E.CONCURRENT_TRANSACTIONS
        other = await c.end_transaction("a", 1000, 0, False, transaction_version=2)
        assert other.error_code == E.INVALID_TXN_STATE
        h.receiver.hold.set()
        await h.settled("a", "CompleteCommit")
        abort = await c.end_transaction("a", 1000, 1, False, transaction_version=2)
        assert (abort.error_code, abort.producer_epoch) == (E.NONE, 2)

    run(scenario())
