"""ReplicaManager's request methods without sockets or handlers: append_records (leader
checks, the caller's refusals, appends, the delayed acks=-1 answer), fetch_messages (reads, the
follower identity check, follower fetch state moving the high watermark, the ISR expansion
wake-up, the long poll) and delete_records_on_leader with its wait.

The partitions are real ``Partition`` objects on the memory engine, led by broker 1 with
followers 2 and 3, in a ReplicaManager given a stub of the cluster metadata.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import uuid
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.append import AppendResult, ProduceEntry
from pydmq.replication.fetch import FetchParams, FetchPartitionResult, FetchTarget
from pydmq.replication.partition import Partition
from pydmq.replication.replica_manager import HIGH_WATERMARK, ReplicaManager
from pydmq.storage.api import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replica_support import TP, batch, partition

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
KNOWN_ELSEWHERE = TopicPartition(TP.topic, 7)  # the cluster knows it; hosted on another broker
TOPIC_ID = uuid.UUID(int=1)
BROKER_EPOCHS = {1: 100, 2: 200, 3: 300}


class _Metadata:
    """The cluster metadata as the replica manager asks it."""

    def partition(self, tp: TopicPartition) -> object | None:
        return object() if tp.topic == TP.topic else None

    def broker_epoch(self, broker_id: int) -> int:
        return BROKER_EPOCHS.get(broker_id, -1)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in BROKER_EPOCHS


class _Manager:
    """A replica manager of broker 1 hosting ``partitions``, counting ISR expansion wakes."""

    def __init__(self, *partitions: Partition) -> None:
        self.rm = ReplicaManager(BrokerConfig({"node.id": 1}), {})
        for p in partitions:
            self.rm.partitions[p.tp] = p
        self.expansions = 0
        self.rm.attach_cluster(_Metadata(), self._expansion_wanted)

    def _expansion_wanted(self) -> None:
        self.expansions += 1


def _leader(records: int = 0, isr: tuple[int, ...] = (1, 2, 3)) -> Partition:
    """TP led by broker 1 (epoch 1) with followers 2 and 3, every follower at the log end."""
    p = partition(1)
    assert p.make_leader(1, 1, [1, 2, 3], list(isr), now_ms=0)
    if records:
        p.append_records_to_leader(batch(records))
        for follower in isr:
            if follower != 1:
                p.update_follower_fetch_state(follower, records, now_ms=0, log_start_offset=0)
    assert p.high_watermark == records
    return p


def _consumer(max_wait_ms: int = 0, min_bytes: int = 1) -> FetchParams:
    return FetchParams(-1, -1, False, max_wait_ms, min_bytes, 1 << 20, True)


def _follower(
    replica_id: int, inter_broker: bool = True, epoch: int | None = None, max_wait_ms: int = 0
) -> FetchParams:
    replica_epoch = BROKER_EPOCHS[replica_id] if epoch is None else epoch
    return FetchParams(replica_id, replica_epoch, inter_broker, max_wait_ms, 1, 1 << 20, True)


def _target(offset: int, tp: TopicPartition = TP, log_start: int = -1) -> FetchTarget:
    return FetchTarget(TOPIC_ID, tp, offset, 1 << 20, -1, log_start)


def _now(answer: list[T] | Awaitable[list[T]]) -> list[T]:
    assert isinstance(answer, list), "answered later, expected now"
    return answer


def _later(answer: list[T] | Awaitable[list[T]]) -> asyncio.Future[list[T]]:
    assert inspect.isawaitable(answer), "answered now, expected later"
    return asyncio.ensure_future(answer)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _codes(results: list[AppendResult] | list[FetchPartitionResult]) -> list[int]:
    return [r.error_code for r in results]


# -- append_records ----------------------------------------------------------------------


def test_append_records_checks_leadership_before_the_callers_refusal() -> None:
    follower = partition(1)
    follower.make_follower(2, 1, 1, [1, 2, 3], [1, 2, 3])
    manager = _Manager(follower)
    entries = [
        ProduceEntry(TopicPartition("nope", 0), batch(1)),
        ProduceEntry(KNOWN_ELSEWHERE, batch(1)),
        ProduceEntry(TP, batch(1), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ]
    results = _now(manager.rm.append_records(entries, 1, 1000))
    assert _codes(results) == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ]
    assert follower.log.log_end_offset == 0


def test_append_records_answers_the_callers_refusal_on_a_led_partition() -> None:
    leader = _leader()
    manager = _Manager(leader)
    entry = ProduceEntry(TP, batch(1), ErrorCode.INVALID_TXN_STATE, "no transactions")
    [result] = _now(manager.rm.append_records([entry], 1, 1000))
    assert (result.error_code, result.error_message, result.base_offset) == (
        ErrorCode.INVALID_TXN_STATE,
        "no transactions",
        -1,
    )
    assert leader.log.log_end_offset == 0


def test_append_records_acks_1_answers_after_the_leaders_append() -> None:
    leader = _leader()
    manager = _Manager(leader)
    results = _now(manager.rm.append_records([ProduceEntry(TP, batch(3))] * 2, 1, 1000))
    assert [(r.error_code, r.base_offset) for r in results] == [
        (ErrorCode.NONE, 0),
        (ErrorCode.NONE, 3),
    ]
    assert leader.log.log_end_offset == 6
    assert leader.high_watermark == 0  # the followers have not fetched


def test_append_records_acks_all_refused_below_min_isr() -> None:
    leader = partition(1, min_isr=2)
    leader.make_leader(1, 1, [1, 2, 3], [1], now_ms=0)
    manager = _Manager(leader)
    [result] = _now(manager.rm.append_records([ProduceEntry(TP, batch(1))], -1, 1000))
    assert result.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.log.log_end_offset == 0


def test_acks_all_waits_for_the_follower_fetches_through_fetch_messages() -> None:
    async def scenario() -> None:
        leader = _leader()
        manager = _Manager(leader)
        waiting = _later(manager.rm.append_records([ProduceEntry(TP, batch(4))], -1, 5000))
        await _settle()
        assert not waiting.done()
        _now(manager.rm.fetch_messages(_follower(2), [_target(4)]))
        await _settle()
        assert not waiting.done()  # broker 3 has not fetched the records yet
        _now(manager.rm.fetch_messages(_follower(3), [_target(4)]))
        [result] = await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
        assert leader.high_watermark == 4

    asyncio.run(scenario())


def test_acks_all_times_out_without_its_offsets() -> None:
    async def scenario() -> None:
        manager = _Manager(_leader())
        waiting = _later(manager.rm.append_records([ProduceEntry(TP, batch(2))], -1, 50))
        [result] = await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.base_offset, result.log_append_time) == (
            ErrorCode.REQUEST_TIMED_OUT,
            -1,
            -1,
        )

    asyncio.run(scenario())


# -- fetch_messages ----------------------------------------------------------------------


def test_a_consumer_reads_up_to_the_high_watermark() -> None:
    leader = _leader(5)
    leader.append_records_to_leader(batch(3))  # offsets 5-7, above the high watermark
    manager = _Manager(leader)
    [result] = _now(manager.rm.fetch_messages(_consumer(), [_target(0)]))
    assert (result.error_code, result.high_watermark, result.log_start_offset) == (
        ErrorCode.NONE,
        5,
        0,
    )
    assert result.last_stable_offset == 5
    assert result.records is not None
    [beyond] = _now(manager.rm.fetch_messages(_consumer(), [_target(5)]))
    assert beyond.records is None


def test_fetch_errors_per_target_in_the_targets_order() -> None:
    manager = _Manager(_leader(2))
    targets = [
        FetchTarget(TOPIC_ID, TopicPartition("", 0), 0, 100, -1, error=ErrorCode.UNKNOWN_TOPIC_ID),
        _target(0, TopicPartition("nope", 0)),
        _target(0, KNOWN_ELSEWHERE),
        FetchTarget(TOPIC_ID, TP, 0, 100, current_leader_epoch=0),
        FetchTarget(TOPIC_ID, TP, 0, 100, current_leader_epoch=2),
        _target(99),
    ]
    results = _now(manager.rm.fetch_messages(_consumer(max_wait_ms=10_000), targets))
    assert _codes(results) == [
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_OUT_OF_RANGE,
    ]


@pytest.mark.parametrize(
    ("params", "why"),
    [
        (_follower(2, inter_broker=False), "not over the inter-broker listener"),
        (_follower(2, epoch=199), "a stale broker epoch"),
        (_follower(1), "this broker itself"),
        (FetchParams(4, 400, True, 0, 1, 1 << 20, True), "not a replica"),
    ],
)
def test_a_follower_claim_not_believed_changes_nothing(params: FetchParams, why: str) -> None:
    leader = _leader(3, isr=(1, 2))
    leader.append_records_to_leader(batch(2))
    manager = _Manager(leader)
    [result] = _now(manager.rm.fetch_messages(params, [_target(5)]))
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, why
    assert result.records is None
    assert leader.high_watermark == 3
    assert leader.remote_replicas[2].log_end_offset == 3
    assert manager.expansions == 0


def test_a_follower_reads_past_the_high_watermark_and_moves_it() -> None:
    leader = _leader(3, isr=(1, 2))
    leader.append_records_to_leader(batch(2))  # log end 5, high watermark 3
    manager = _Manager(leader)
    [result] = _now(manager.rm.fetch_messages(_follower(2), [_target(3)]))
    assert result.error_code == ErrorCode.NONE
    assert result.records is not None  # offsets 3-4, above the high watermark
    assert leader.high_watermark == 3
    _now(manager.rm.fetch_messages(_follower(2), [_target(5, log_start=0)]))
    assert leader.high_watermark == 5
    assert manager.expansions == 0  # broker 2 is in the ISR


def test_a_caught_up_follower_outside_the_isr_asks_for_an_expansion() -> None:
    leader = _leader(3, isr=(1, 2))
    manager = _Manager(leader)
    _now(manager.rm.fetch_messages(_follower(3), [_target(1)]))
    assert manager.expansions == 0  # behind the high watermark
    _now(manager.rm.fetch_messages(_follower(3), [_target(3)]))
    assert manager.expansions == 1


def test_a_long_poll_completes_on_an_append() -> None:
    async def scenario() -> None:
        manager = _Manager(_leader(isr=(1,)))
        waiting = _later(manager.rm.fetch_messages(_consumer(max_wait_ms=10_000), [_target(0)]))
        await _settle()
        assert not waiting.done()
        _now(manager.rm.append_records([ProduceEntry(TP, batch(2))], 1, 1000))
        [result] = await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.high_watermark) == (ErrorCode.NONE, 2)
        assert result.records is not None

    asyncio.run(scenario())


def test_a_long_poll_is_woken_by_an_append_before_its_first_wait() -> None:
    """The read that found nothing and the long poll's first wait are in different loop steps
    (the handler returns the awaitable; it runs later): an append in between must still wake
    it, not leave it parked for ``max_wait_ms`` (a flaky read_committed test found this)."""

    async def scenario() -> None:
        manager = _Manager(_leader(isr=(1,)))
        answer = manager.rm.fetch_messages(_consumer(max_wait_ms=10_000), [_target(0)])
        assert inspect.isawaitable(answer)
        _now(manager.rm.append_records([ProduceEntry(TP, batch(2))], 1, 1000))  # not yet awaited
        [result] = await asyncio.wait_for(answer, 5)
        assert (result.error_code, result.high_watermark) == (ErrorCode.NONE, 2)
        assert result.records is not None

    asyncio.run(scenario())


def test_a_long_poll_answers_empty_after_max_wait() -> None:
    async def scenario() -> None:
        manager = _Manager(_leader(2, isr=(1,)))
        waiting = _later(manager.rm.fetch_messages(_consumer(max_wait_ms=30), [_target(2)]))
        [result] = await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.records, result.high_watermark) == (
            ErrorCode.NONE,
            None,
            2,
        )

    asyncio.run(scenario())


def test_a_parked_follower_fetch_completes_when_the_log_start_moves() -> None:
    async def scenario() -> None:
        leader = _leader(6)
        manager = _Manager(leader)
        params = _follower(2, max_wait_ms=10_000)
        waiting = _later(manager.rm.fetch_messages(params, [_target(6, log_start=0)]))
        await _settle()
        assert not waiting.done()
        deleted, delayed = manager.rm.delete_records_on_leader(leader, 4)
        assert delayed is not None  # the followers still report log start 0
        [result] = await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.log_start_offset, result.records) == (
            ErrorCode.NONE,
            4,
            None,
        )
        assert deleted.low_watermark == 0

    asyncio.run(scenario())


# -- delete_records_on_leader -------------------------------------------------------------


def test_delete_records_out_of_range_and_to_the_high_watermark() -> None:
    leader = _leader(5, isr=(1,))
    leader.make_leader(2, 2, [1], [1], now_ms=0)  # replication factor 1: nothing to wait for
    manager = _Manager(leader)
    for offset in (6, -2):
        result, delayed = manager.rm.delete_records_on_leader(leader, offset)
        assert (result.error_code, result.low_watermark, delayed) == (
            ErrorCode.OFFSET_OUT_OF_RANGE,
            -1,
            None,
        )
    result, delayed = manager.rm.delete_records_on_leader(leader, HIGH_WATERMARK)
    assert (result.error_code, result.low_watermark, delayed) == (ErrorCode.NONE, 5, None)
    assert leader.log.log_start_offset == 5


def test_delete_records_waits_for_the_followers_log_starts_reported_in_fetches() -> None:
    async def scenario() -> None:
        leader = _leader(8)
        manager = _Manager(leader)
        result, delayed = manager.rm.delete_records_on_leader(leader, 5)
        assert delayed is not None and result.low_watermark == 0
        waiting = asyncio.ensure_future(manager.rm.delayed_delete_records([delayed], 5000))
        await _settle()
        _now(manager.rm.fetch_messages(_follower(2), [_target(8, log_start=5)]))
        await _settle()
        assert not waiting.done()
        _now(manager.rm.fetch_messages(_follower(3), [_target(8, log_start=5)]))
        await asyncio.wait_for(waiting, 5)
        assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 5)

    asyncio.run(scenario())
