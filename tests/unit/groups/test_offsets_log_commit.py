"""``__consumer_offsets``' wait for its log end to be committed (the runtime's fail-over).

:meth:`ReplicaManagerOffsetsWriter.await_log_end` resolves once the leader's high watermark
reaches the log end offset of the call, however many ``offsets.commit.timeout.ms`` that takes,
and with NOT_LEADER_OR_FOLLOWER when the partition's leadership moves first. A leader
partition with three replicas on the memory engine; no sockets.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from pydmq.engines.memory import MemoryLog
from pydmq.groups.log import OFFSETS_TOPIC, ReplicaManagerOffsetsWriter
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.replication.partition import Partition
from pydmq.replication.purgatory import DelayedOperationPurgatory
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, UnifiedLog

pytestmark = pytest.mark.timeout(30)

T = TypeVar("T")
TP = TopicPartition(OFFSETS_TOPIC, 0)


class Replicas:
    """The replica manager as the writer reads it: one hosted partition, a purgatory."""

    def __init__(self, hosted: Partition) -> None:
        self.hosted = hosted
        self.produce_purgatory = DelayedOperationPurgatory()

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.hosted if tp == TP else None


class Host:
    def __init__(self, replicas: Replicas) -> None:
        self.replica_manager = replicas


def leader() -> Partition:
    policy = AppendPolicy(
        max_message_bytes=1 << 20,
        log_append_time=False,
        timestamp_before_max_ms=2**62,
        timestamp_after_max_ms=2**62,
        flush_messages=2**63 - 1,
    )
    p = Partition(
        tp=TP,
        topic_id=uuid.UUID(int=1),
        log=UnifiedLog(MemoryLog(LogConfig())),
        leader_id=-1,
        leader_epoch=-1,
        replicas=[],
        isr=[],
        policy=policy,
        min_insync_replicas=1,
        local_broker_id=1,
    )
    assert p.make_leader(1, 1, [1, 2, 3], [1, 2, 3], now_ms=0)
    data = build_batch([SimpleRecord(b"k", b"v", (), 1000)] * 2)
    p.append_records_to_leader(memoryview(bytearray(data)), required_acks=-1)
    return p


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_the_log_end_is_awaited_past_the_commit_timeout() -> None:
    async def scenario() -> None:
        hosted = leader()
        replicas = Replicas(hosted)
        writer = ReplicaManagerOffsetsWriter(Host(replicas), timeout_ms=20)  # type: ignore[arg-type]
        waiting = writer.await_log_end(0)
        assert waiting is not None
        await asyncio.sleep(0.1)  # several commit timeouts
        assert not waiting.done()
        hosted.update_follower_fetch_state(2, 2, now_ms=10)
        hosted.update_follower_fetch_state(3, 2, now_ms=10)
        assert hosted.high_watermark == 2
        replicas.produce_purgatory.notify(TP)
        assert await asyncio.wait_for(waiting, 5) == E.NONE
        assert writer.await_log_end(0) is None  # committed already

    run(scenario())


def test_a_leadership_change_ends_the_wait() -> None:
    async def scenario() -> None:
        hosted = leader()
        replicas = Replicas(hosted)
        writer = ReplicaManagerOffsetsWriter(Host(replicas), timeout_ms=20)  # type: ignore[arg-type]
        waiting = writer.await_log_end(0)
        assert waiting is not None
        hosted.make_follower(2, 2, 2, [1, 2, 3], [1, 2, 3])
        replicas.produce_purgatory.notify(TP)
        assert await asyncio.wait_for(waiting, 5) == E.NOT_LEADER_OR_FOLLOWER
        missing = ReplicaManagerOffsetsWriter(Host(Replicas(leader())), timeout_ms=20)  # type: ignore[arg-type]
        gone = missing.await_log_end(1)  # a partition not hosted here
        assert gone is not None and gone.result() == E.NOT_LEADER_OR_FOLLOWER

    run(scenario())
