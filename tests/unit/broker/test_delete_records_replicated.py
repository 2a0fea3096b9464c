"""DeleteRecords in cluster mode: leader only, answered once the replicas have the log start.

The handler runs against a stub broker holding real ``Partition`` objects on the memory
engine: followers refuse, the leader moves its log start at once but holds the answer until
the low watermark (smallest log start of the leader and its followers) reaches the requested
offset, REQUEST_TIMED_OUT after the request's timeout, and a replication factor of 1 answers
at once. Follower fetches are simulated with ``update_follower_fetch_state`` plus the
purgatory notification the Fetch handler does.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydmq.api.handler import RequestContext
from pydmq.broker.handlers import delete_records
from pydmq.config.broker import BrokerConfig
from pydmq.config.topic import TopicConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from pydmq.replication.partition import Partition
from pydmq.replication.replica_manager import ReplicaManager
from pydmq.storage.api import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "replication"))

from replica_support import POLICY, TP, batch, new_log, partition

OTHER = TopicPartition("t", 1)  # known to the cluster, hosted elsewhere


class _Metadata:
    def __init__(self, dead: Iterable[int] = ()) -> None:
        self.dead = set(dead)

    def partition(self, tp: TopicPartition) -> object | None:
        return object() if tp.topic == TP.topic else None

    def is_alive(self, broker_id: int) -> bool:
        return broker_id not in self.dead


def _broker(*partitions: Partition, cluster: bool = True, dead: Iterable[int] = ()) -> Any:
    config = BrokerConfig({"node.id": 1})
    replica_manager = ReplicaManager(config, {})
    for p in partitions:
        replica_manager.partitions[p.tp] = p
    metadata = _Metadata(dead)
    if cluster:
        replica_manager.attach_cluster(metadata, lambda: None)
    return SimpleNamespace(
        replica_manager=replica_manager,
        cluster=SimpleNamespace(metadata_cache=metadata) if cluster else None,
        topic_config=lambda name: TopicConfig(config, {}),
        authorizer=None,
    )


def _ctx(broker: Any) -> RequestContext:
    return RequestContext(broker, 21, 2, 1, "test", "127.0.0.1", 1, "PLAINTEXT", 1)


def _request(*offsets: tuple[int, int], timeout: int = 5000) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        timeout=timeout,
        topics=[
            DeleteRecordsTopic(
                name=TP.topic,
                partitions=[
                    DeleteRecordsPartition(partition_index=i, offset=o) for i, o in offsets
                ],
            )
        ],
    )


def _results(response: DeleteRecordsResponse) -> list[tuple[int, int]]:
    parts: list[DeleteRecordsPartitionResult] = response.topics[0].partitions
    return [(r.error_code, r.low_watermark) for r in parts]


def _leader(records: int = 10) -> Partition:
    """Leader of TP (broker 1) with followers 2 and 3 in the ISR, all at log start 0."""
    p = partition(1)
    assert p.make_leader(1, 1, [1, 2, 3], [1, 2, 3], now_ms=0)
    p.append_records_to_leader(batch(records))
    for follower in (2, 3):
        p.update_follower_fetch_state(follower, records, now_ms=0, log_start_offset=0)
    assert p.high_watermark == records
    return p


def _fetched(broker: Any, p: Partition, follower: int, log_start: int) -> None:
    """A follower fetch at the log end reporting ``log_start`` (what Fetch does)."""
    p.update_follower_fetch_state(follower, p.log.log_end_offset, 1, log_start_offset=log_start)
    broker.replica_manager.delete_records_purgatory.notify(p.tp)


def _now(broker: Any, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    """The handler's answer, which must not wait."""
    response = delete_records.handle(_ctx(broker), request)
    assert isinstance(response, DeleteRecordsResponse)
    return response


def _later(broker: Any, request: DeleteRecordsRequest) -> asyncio.Future[DeleteRecordsResponse]:
    """The handler's answer, which must wait."""
    waiting = delete_records.handle(_ctx(broker), request)
    assert inspect.isawaitable(waiting)
    return asyncio.ensure_future(waiting)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_follower_refuses_and_keeps_its_log_start() -> None:
    f = partition(2)
    f.make_follower(1, 1, 1, [1, 2, 3], [1, 2, 3])
    f.append_records_as_follower(batch(10, base_offset=0, epoch=1))
    f.update_follower_high_watermark(10)
    broker = _broker(f)
    for offset in (5, -1):
        response = _now(broker, _request((0, offset)))
        assert _results(response) == [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]
    assert f.log.log_start_offset == 0


def test_partitions_not_hosted_here() -> None:
    broker = _broker()
    response = _now(broker, _request((1, 0)))
    assert _results(response) == [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]
    request = DeleteRecordsRequest(
        timeout=1000,
        topics=[
            DeleteRecordsTopic(
                name="nope", partitions=[DeleteRecordsPartition(partition_index=0, offset=0)]
            )
        ],
    )
    response = _now(broker, request)
    assert _results(response) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


def test_offsets_out_of_range_as_kafka() -> None:
    p = _leader()
    p.append_records_to_leader(batch(5))  # log end 15, high watermark still 10
    broker = _broker(p)
    response = _now(broker, _request((0, 11)))
    assert _results(response) == [(ErrorCode.OFFSET_OUT_OF_RANGE, -1)]
    response = _now(broker, _request((0, -2)))
    assert _results(response) == [(ErrorCode.OFFSET_OUT_OF_RANGE, -1)]
    assert p.log.log_start_offset == 0


def test_leader_answers_once_every_follower_reported_the_new_log_start() -> None:
    async def scenario() -> None:
        p = _leader()
        broker = _broker(p)
        task = _later(broker, _request((0, 5)))
        await _settle()
        assert not task.done()
        assert p.log.log_start_offset == 5  # the leader's own log start moves at once
        _fetched(broker, p, 2, 5)
        await _settle()
        assert not task.done()  # broker 3 still has the records
        _fetched(broker, p, 3, 5)
        response = await asyncio.wait_for(task, 1)
        assert _results(response) == [(ErrorCode.NONE, 5)]

    asyncio.run(scenario())


def test_the_answer_is_the_low_watermark_not_the_leaders_log_start() -> None:
    async def scenario() -> None:
        p = _leader()
        p.log.maybe_increment_log_start_offset(8)  # e.g. an earlier delete not yet replicated
        broker = _broker(p)
        task = _later(broker, _request((0, 6)))
        _fetched(broker, p, 2, 6)
        await _settle()
        assert not task.done()
        _fetched(broker, p, 3, 7)
        response = await asyncio.wait_for(task, 1)
        assert _results(response) == [(ErrorCode.NONE, 6)]
        # -1: the high watermark; answered with the low watermark once all reached it.
        task = _later(broker, _request((0, -1)))
        _fetched(broker, p, 2, 10)
        _fetched(broker, p, 3, 10)
        response = await asyncio.wait_for(task, 1)
        assert _results(response) == [(ErrorCode.NONE, 10)]

    asyncio.run(scenario())


def test_request_timed_out_when_a_follower_does_not_report() -> None:
    async def scenario() -> None:
        p = _leader()
        other = _leader()
        other.tp = OTHER
        broker = _broker(p, other)
        task = _later(broker, _request((0, 4), (1, 3), timeout=100))
        for follower in (2, 3):
            _fetched(broker, other, follower, 3)
        _fetched(broker, p, 2, 4)  # broker 3 never reports partition 0
        response = await asyncio.wait_for(task, 2)
        assert _results(response) == [(ErrorCode.REQUEST_TIMED_OUT, 0), (ErrorCode.NONE, 3)]
        assert p.log.log_start_offset == 4  # the leader's delete stays, as in Kafka

    asyncio.run(scenario())


def test_leadership_lost_while_waiting() -> None:
    async def scenario() -> None:
        p = _leader()
        broker = _broker(p)
        task = _later(broker, _request((0, 5)))
        await _settle()
        p.make_follower(2, 2, 2, [1, 2, 3], [2, 3])
        broker.replica_manager.notify_high_watermark(TP)
        response = await asyncio.wait_for(task, 1)
        assert _results(response) == [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)]

    asyncio.run(scenario())


def test_a_dead_follower_out_of_the_isr_does_not_hold_the_answer() -> None:
    async def scenario() -> None:
        p = _leader()
        p.isr_change_committed([1, 2], 2)  # broker 3 left the ISR
        broker = _broker(p, dead=[3])
        task = _later(broker, _request((0, 5)))
        _fetched(broker, p, 2, 5)
        response = await asyncio.wait_for(task, 1)
        assert _results(response) == [(ErrorCode.NONE, 5)]

    asyncio.run(scenario())


def test_replication_factor_one_answers_at_once() -> None:
    for cluster in (True, False):
        p = Partition(
            tp=TP,
            topic_id=uuid.UUID(int=1),
            log=new_log(),
            leader_id=1,
            leader_epoch=0,
            replicas=[1],
            isr=[1],
            policy=POLICY,
            min_insync_replicas=1,
        )
        p.append_records_to_leader(batch(10))
        response = _now(_broker(p, cluster=cluster), _request((0, 5)))
        assert _results(response) == [(ErrorCode.NONE, 5)]
        assert p.log.log_start_offset == 5
