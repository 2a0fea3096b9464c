"""DeleteRecords in cluster mode: only the leader deletes.

The handler runs against a stub broker holding real ``Partition`` objects on the memory
engine: followers refuse with NOT_LEADER_OR_FOLLOWER and keep their log start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydmq.broker.handler import RequestContext
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

from replica_support import TP, batch, partition

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
    return SimpleNamespace(
        replica_manager=replica_manager,
        cluster=SimpleNamespace(metadata_cache=_Metadata(dead)) if cluster else None,
        topic_config=lambda name: TopicConfig(config, {}),
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
    """Leader of TP (broker 1) with followers 2 and 3 in the ISR, all caught up."""
    p = partition(1)
    assert p.make_leader(1, 1, [1, 2, 3], [1, 2, 3], now_ms=0)
    p.append_records_to_leader(batch(records))
    for follower in (2, 3):
        p.update_follower_fetch_state(follower, records, now_ms=0)
    assert p.high_watermark == records
    return p


def _now(broker: Any, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    """The handler's answer, which must not wait."""
    response = delete_records.handle(_ctx(broker), request)
    assert isinstance(response, DeleteRecordsResponse)
    return response


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
