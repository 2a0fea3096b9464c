"""Three pydmq nodes (broker + controller) in one event loop, driven over the wire."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import LogStorageError

from .conftest import Cluster, wait_until


def _produce(topic: str, partition: int, acks: int, *values: bytes) -> ProduceRequest:
    batch = build_batch([SimpleRecord(None, v) for v in values])
    return ProduceRequest(
        acks=acks,
        timeout=5000,
        topic_data=[
            TopicProduceData(
                name=topic,
                partition_data=[PartitionProduceData(index=partition, records=bytes(batch))],
            )
        ],
    )


async def _create(cluster: Cluster, name: str, partitions: int, rf: int) -> None:
    conn = cluster.client(0)
    response = await conn.request(
        19,
        7,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)],
            timeout=10000,
        ),
    )
    assert response.topics[0].error_code == ErrorCode.NONE, response
    await wait_until(
        lambda: all(
            len([tp for tp in b.replica_manager.partitions if tp.topic == name])
            == partitions * rf // len(cluster.brokers)
            for b in cluster.brokers
        )
    )


def _leader_of(cluster: Cluster, tp: TopicPartition) -> int:
    for b in cluster.brokers:
        partition = b.replica_manager.get(tp)
        if partition is not None and partition.is_leader:
            return b.node_id
    raise AssertionError(f"no leader for {tp}")


def test_replicated_produce_and_fetch(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            await _create(cluster, "rep", 3, 3)
            # Metadata from any broker: three brokers, leaders, full ISR.
            md = await cluster.client(1).request(
                3, 12, MetadataRequest(topics=[MetadataRequestTopic(name="rep")])
            )
            assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
            (topic,) = md.topics
            assert topic.error_code == ErrorCode.NONE
            assert sorted(len(p.isr_nodes) for p in topic.partitions) == [3, 3, 3]

            tp = TopicPartition("rep", 0)
            leader = _leader_of(cluster, tp)
            follower = next(b.node_id for b in cluster.brokers if b.node_id != leader)
            # A follower refuses produce and consumer fetch.
            response = await cluster.client(follower - 1).request(
                0, 9, _produce("rep", 0, -1, b"x")
            )
            assert response.responses[0].partition_responses[0].error_code == (
                ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
            # acks=-1 to the leader answers once every ISR member has the records.
            response = await cluster.client(leader - 1).request(
                0, 9, _produce("rep", 0, -1, b"a", b"b", b"c")
            )
            result = response.responses[0].partition_responses[0]
            assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
            assert cluster.broker(leader).replica_manager.get(tp).high_watermark == 3
            for b in cluster.brokers:
                assert b.replica_manager.get(tp).log.log_end_offset == 3
            await wait_until(
                lambda: all(b.replica_manager.get(tp).high_watermark == 3 for b in cluster.brokers)
            )
            fetch = FetchRequest(
                max_wait=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    FetchTopic(
                        topic="rep",
                        partitions=[
                            FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                        ],
                    )
                ],
            )
            data = (
                (await cluster.client(leader - 1).request(1, 12, fetch)).responses[0].partitions[0]
            )
            assert data.error_code == ErrorCode.NONE and data.high_watermark == 3
            assert data.records is not None and len(data.records) > 0
            data = (
                (await cluster.client(follower - 1).request(1, 12, fetch))
                .responses[0]
                .partitions[0]
            )
            assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # Producer ids come from controller-allocated blocks, distinct across brokers.
            ids = set()
            for i in range(3):
                r = await cluster.client(i).request(
                    22, 4, InitProducerIdRequest(transaction_timeout=1000)
                )
                assert r.error_code == ErrorCode.NONE
                ids.add(r.producer_id)
            assert len(ids) == 3
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_leader_failover_keeps_acknowledged_records(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            await _create(cluster, "fo", 1, 3)
            tp = TopicPartition("fo", 0)
            leader = _leader_of(cluster, tp)
            response = await cluster.client(leader - 1).request(
                0, 9, _produce("fo", 0, -1, b"1", b"2")
            )
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            # Controlled shutdown of the leader moves leadership to an ISR member.
            await cluster.node(leader).stop()
            survivors = [b for b in cluster.brokers if b.node_id != leader]
            await wait_until(
                lambda: any(
                    (p := b.replica_manager.get(tp)) is not None and p.is_leader for b in survivors
                )
            )
            new_leader = next(
                b for b in survivors if (p := b.replica_manager.get(tp)) is not None and p.is_leader
            )
            partition = new_leader.replica_manager.get(tp)
            assert partition is not None and partition.log.log_end_offset == 2
            response = await cluster.client(new_leader.node_id - 1).request(
                0, 9, _produce("fo", 0, -1, b"3")
            )
            result = response.responses[0].partition_responses[0]
            assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 2)
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_delete_records_answered_once_the_followers_have_the_log_start(tmp_path: Path) -> None:
    """A long replica fetch wait: the parked follower fetches must complete on the log start
    move, or the followers would learn it only after 30 s and the request would time out."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path, replica_fetch_wait_max_ms=30000)
        try:
            await cluster.start()
            await _create(cluster, "dr", 1, 3)
            tp = TopicPartition("dr", 0)
            leader = _leader_of(cluster, tp)
            values = [b"v%d" % i for i in range(20)]
            response = await cluster.client(leader - 1).request(
                0, 9, _produce("dr", 0, -1, *values)
            )
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            await wait_until(
                lambda: all(
                    b.replica_manager.get(tp).log.log_end_offset == 20 for b in cluster.brokers
                )
            )

            def delete(offset: int) -> DeleteRecordsRequest:
                return DeleteRecordsRequest(
                    timeout=10000,
                    topics=[
                        DeleteRecordsTopic(
                            name="dr",
                            partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)],
                        )
                    ],
                )

            follower = next(b.node_id for b in cluster.brokers if b.node_id != leader)
            response = await cluster.client(follower - 1).request(21, 2, delete(5))
            result = response.topics[0].partitions[0]
            assert (result.error_code, result.low_watermark) == (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                -1,
            )
            assert all(b.replica_manager.get(tp).log.log_start_offset == 0 for b in cluster.brokers)

            loop = asyncio.get_running_loop()
            started = loop.time()
            response = await cluster.client(leader - 1).request(21, 2, delete(15))
            result = response.topics[0].partitions[0]
            assert (result.error_code, result.low_watermark) == (ErrorCode.NONE, 15)
            assert loop.time() - started < 5
            # Answered only once every replica had it.
            assert [b.replica_manager.get(tp).log.log_start_offset for b in cluster.brokers] == [
                15,
                15,
                15,
            ]
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_failed_log_dir_stops_the_followers_fetchers(tmp_path: Path) -> None:
    """A follower whose log dir went offline stops replicating into it (each fetch's append
    would fail again and log a traceback once a second) and asks to be fenced; the others go on.
    """

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            await _create(cluster, "offline-dir", 2, 3)
            tps = [TopicPartition("offline-dir", p) for p in range(2)]
            followers = [
                b
                for b in cluster.brokers
                if all(not b.replica_manager.get(tp).is_leader for tp in tps)
            ]
            target = followers[0] if followers else cluster.brokers[0]
            await wait_until(
                lambda: all(
                    target.cluster.fetchers.fetch_state(tp) is not None
                    for tp in tps
                    if not target.replica_manager.get(tp).is_leader
                )
            )
            target.replica_manager.log_dir_failed(str(target.log_dir), "test: EIO on write")
            for tp in tps:
                assert target.cluster.fetchers.fetch_state(tp) is None
            # The controller fences it (want_fence) and the leaders shrink their ISR.
            await wait_until(
                lambda: all(
                    target.node_id not in b.replica_manager.get(tp).isr
                    for b in cluster.brokers
                    if b is not target
                    for tp in tps
                    if b.replica_manager.get(tp).is_leader
                ),
                timeout=20,
            )
            assert all(target.cluster.fetchers.fetch_state(tp) is None for tp in tps)
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_follower_goes_on_after_an_append_that_landed_then_failed(tmp_path: Path) -> None:
    """A follower append can reach the log and still fail (a flush's checkpoint write on a full
    disk, found by the chaos harness's disk_full fault): the fetcher must go on from the log
    end, not refetch what it holds ("follower append at 2034 below the expected offset 2035",
    once a second, forever)."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            await _create(cluster, "landed", 1, 3)
            tp = TopicPartition("landed", 0)
            leader = _leader_of(cluster, tp)
            follower = next(b for b in cluster.brokers if b.node_id != leader)
            partition = follower.replica_manager.get(tp)
            real = partition.log.append_as_follower
            failures = []

            def landed_then_failed(records: memoryview, flush: int | None = None) -> object:
                result = real(records, flush)
                if not failures:
                    failures.append(partition.log.log_end_offset)
                    raise LogStorageError("test: checkpoint write failed", "d", offline=False)
                return result

            partition.log.append_as_follower = landed_then_failed  # type: ignore[method-assign]
            for i in range(3):
                response = await cluster.client(leader - 1).request(
                    0, 9, _produce("landed", 0, 1, b"v%d" % i)
                )
                assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            await wait_until(lambda: partition.log.log_end_offset == 3, timeout=10)
            assert failures == [1]
            leader_log = cluster.broker(leader).replica_manager.get(tp).log
            assert leader_log.log_end_offset == 3
        finally:
            await cluster.stop()

    asyncio.run(scenario())
