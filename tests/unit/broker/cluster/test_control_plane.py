"""Only the quorum's controller controls a broker, and only a registered follower moves the
high watermark: in-process clusters driven over the wire (see conftest.Cluster)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pydmq.broker.cluster.replica_fetcher import FetchState
from pydmq.broker.server import Broker
from pydmq.net.client import NodeConnection, NodeConnectionError
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ReplicaState,
)
from pydmq.protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from pydmq.protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import TopicPartition

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(60)

API_VERSIONS = ApiVersionsRequest(client_software_name="test", client_software_version="1")
CONTROL_PLANE = "CONTROL_PLANE"


async def _create(cluster: Cluster, name: str) -> TopicPartition:
    response = await cluster.client(0).request(
        19,
        7,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=3)],
            timeout=10000,
        ),
    )
    assert response.topics[0].error_code == ErrorCode.NONE, response
    tp = TopicPartition(name, 0)
    await wait_until(lambda: all(b.replica_manager.get(tp) is not None for b in cluster.brokers))
    await wait_until(lambda: _leader(cluster, tp) is not None)
    return tp


def _leader(cluster: Cluster, tp: TopicPartition) -> Broker | None:
    for broker in cluster.brokers:
        partition = broker.replica_manager.get(tp)
        if partition is not None and partition.is_leader:
            return broker
    return None


def _cluster_of(broker: Broker) -> Any:
    assert broker.cluster is not None
    return broker.cluster


# -- listeners ---------------------------------------------------------------------------------


def test_controller_apis_are_served_on_the_control_plane_listener_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            tp = await _create(cluster, "guarded")
            leader = _leader(cluster, tp)
            assert leader is not None
            broker = cluster.brokers[0]
            plane = cluster.connect(0, CONTROL_PLANE)
            client_keys = {
                k.api_key for k in (await cluster.client(0).request(18, 3, API_VERSIONS)).api_keys
            }
            plane_keys = {k.api_key for k in (await plane.request(18, 3, API_VERSIONS)).api_keys}
            controller_keys = {
                k.api_key
                for k in (
                    await cluster.connect(0, "CONTROLLER").request(18, 3, API_VERSIONS)
                ).api_keys
            }
            assert not client_keys & {4, 5, 6, 7, 52, 53, 54, 55, 59}
            # and the SASL exchange, for a SASL control-plane listener
            assert plane_keys == {4, 5, 6, 17, 18, 36}
            # The Raft RPCs and ControlledShutdown: the controller listener only, never 4-6.
            assert {7, 52, 53, 54, 55, 59} <= controller_keys
            assert not controller_keys & {4, 5, 6}
            # The control-plane endpoint is registered, but clients never see it.
            cache = _cluster_of(broker).metadata_cache
            await wait_until(
                lambda: all(CONTROL_PLANE in b.endpoints for b in cache.brokers.values())
            )
            # A client listener closes the connection on keys 4-6, as on any unknown key.
            for key, version, request in (
                (4, 7, LeaderAndIsrRequest()),
                (5, 4, StopReplicaRequest()),
                (6, 8, UpdateMetadataRequest()),
            ):
                with pytest.raises(NodeConnectionError):
                    await cluster.client(0).request(key, version, request, timeout=5)
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_forged_and_sentinel_requests_on_the_control_plane_change_nothing(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        try:
            await cluster.start()
            tp = await _create(cluster, "victim")
            leader = _leader(cluster, tp)
            assert leader is not None
            index = leader.node_id - 1
            cluster_role = _cluster_of(leader)
            cache = cluster_role.metadata_cache
            await wait_until(lambda: cache.controller_epoch >= 0 and len(cache.brokers) == 3)
            controller_id, epoch = cache.controller_id, cache.controller_epoch
            broker_epoch = cluster_role.lifecycle.broker_epoch
            partition = leader.replica_manager.get(tp)
            assert partition is not None
            topic_id = partition.topic_id
            before = (partition.leader_epoch, list(partition.isr), cache.metadata_offset)
            plane = cluster.connect(index, CONTROL_PLANE)

            async def ask(key: int, request: Any) -> Any:
                return await plane.request(key, {4: 7, 5: 4, 6: 8}[key], request, timeout=10)

            stop = StopReplicaRequest(
                controller_id=controller_id,
                controller_epoch=epoch,
                broker_epoch=broker_epoch,
                topic_states=[
                    StopReplicaTopicState(
                        topic_name=tp.topic,
                        partition_states=[
                            StopReplicaPartitionState(leader_epoch=-2, delete_partition=True)
                        ],
                    )
                ],
            )
            follower = next(r for r in partition.replicas if r != leader.node_id)
            state = LeaderAndIsrPartitionState(
                controller_epoch=epoch,
                leader=follower,
                leader_epoch=-1,
                isr=[follower],
                partition_epoch=-1,
                replicas=list(partition.replicas),
            )
            lai = LeaderAndIsrRequest(
                controller_id=controller_id,
                controller_epoch=epoch,
                broker_epoch=broker_epoch,
                type_=1,
                topic_states=[
                    LeaderAndIsrTopicState(
                        topic_name=tp.topic, topic_id=topic_id, partition_states=[state]
                    )
                ],
            )
            empty = UpdateMetadataRequest(
                controller_id=controller_id,
                controller_epoch=2**31 - 1,
                broker_epoch=broker_epoch,
                type_=2,
                metadata_offset=2**62,
            )
            # The real controller's identity with sentinel epochs: refused per partition.
            answer = await ask(5, stop)
            assert answer.error_code == ErrorCode.NONE
            assert [p.error_code for p in answer.partition_errors] == [
                ErrorCode.FENCED_LEADER_EPOCH
            ]
            answer = await ask(4, lai)
            assert answer.error_code == ErrorCode.NONE
            errors = [p.error_code for t in answer.topics for p in t.partition_errors]
            assert errors == [ErrorCode.STALE_CONTROLLER_EPOCH]
            # Broker epoch -1, or one not ours: refused whole.
            for forged in (-1, broker_epoch + 1):
                stop.broker_epoch = lai.broker_epoch = forged
                assert (await ask(5, stop)).error_code == ErrorCode.STALE_BROKER_EPOCH
                assert (await ask(4, lai)).error_code == ErrorCode.STALE_BROKER_EPOCH
            # An epoch the quorum never had: NOT_CONTROLLER, nothing stored.
            assert (await ask(6, empty)).error_code == ErrorCode.NOT_CONTROLLER
            assert (cache.controller_id, cache.controller_epoch) == (controller_id, epoch)
            partition = leader.replica_manager.get(tp)
            assert partition is not None and partition.is_leader
            assert (partition.leader_epoch, list(partition.isr), cache.metadata_offset) == before
            assert len(cache.brokers) == 3 and cache.topics.get(tp.topic) is not None
        finally:
            await cluster.stop()

    asyncio.run(scenario())


def test_a_broker_only_node_follows_the_new_active_controller(tmp_path: Path) -> None:
    """Its epoch check asks the voters: the new controller's FULL push must get through."""

    async def scenario() -> None:
        cluster = Cluster(tmp_path, broker_only=1)
        try:
            await cluster.start()
            observer = _cluster_of(cluster.broker(4))
            cache = observer.metadata_cache

            def active() -> tuple[int, int] | None:
                for broker in cluster.brokers[:3]:
                    controller = broker.controller
                    if controller is not None and controller.is_active:
                        return broker.node_id, controller.epoch
                return None

            await wait_until(lambda: active() is not None)
            first = active()
            assert first is not None
            await wait_until(lambda: (cache.controller_id, cache.controller_epoch) == first)
            await cluster.node(first[0]).stop()
            await wait_until(
                lambda: (a := active()) is not None and a != first, timeout=20, every=0.005
            )
            second = active()
            assert second is not None and second[1] > first[1]
            became_active = time.monotonic()
            await wait_until(
                lambda: (cache.controller_id, cache.controller_epoch) == second,
                timeout=20,
                every=0.005,
            )
            print(
                f"\nbroker-only node obeys controller {second[0]} (epoch {second[1]}) "
                f"{time.monotonic() - became_active:.3f} s after it became active"
            )
            assert observer.controller_epochs.rounds >= 1
        finally:
            await cluster.stop()

    asyncio.run(scenario())


# -- follower fetches --------------------------------------------------------------------------


def _produce(tp: TopicPartition, count: int) -> ProduceRequest:
    batch = build_batch([SimpleRecord(None, b"v%d" % i) for i in range(count)])
    return ProduceRequest(
        acks=1,
        timeout=5000,
        topic_data=[
            TopicProduceData(
                name=tp.topic,
                partition_data=[PartitionProduceData(index=tp.partition, records=bytes(batch))],
            )
        ],
    )


def _follower_fetch(
    tp: TopicPartition,
    topic_id: uuid.UUID,
    version: int,
    replica_id: int,
    replica_epoch: int,
    offset: int,
) -> FetchRequest:
    partition = FetchPartition(
        partition=tp.partition, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    topic = (
        FetchTopic(topic_id=topic_id, partitions=[partition])
        if version >= 13
        else FetchTopic(topic=tp.topic, partitions=[partition])
    )
    request = FetchRequest(max_wait=0, min_bytes=1, max_bytes=1 << 20, topics=[topic])
    if version >= 15:
        request.replica_state = ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch)
    else:
        request.replica_id = replica_id
    return request


def test_forged_follower_fetches_do_not_move_the_high_watermark(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, replication_listener=True)
        try:
            await cluster.start()
            tp = await _create(cluster, "hw")
            leader = _leader(cluster, tp)
            assert leader is not None
            partition = leader.replica_manager.get(tp)
            assert partition is not None
            topic_id = partition.topic_id
            followers = [b for b in cluster.brokers if b is not leader]
            await wait_until(
                lambda: all(
                    len(_cluster_of(leader).metadata_cache.brokers) == 3
                    and _cluster_of(b).fetchers.fetch_state(tp) is not None
                    for b in followers
                )
            )
            fetch_states = {b.node_id: _cluster_of(b).fetchers.fetch_state(tp) for b in followers}
            for b in followers:  # the real followers stop fetching
                _cluster_of(b).fetchers.remove_partitions([tp])
            produced = await cluster.client(leader.node_id - 1).request(0, 9, _produce(tp, 3))
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            assert partition.log.log_end_offset == 3
            hw = partition.high_watermark
            assert hw < 3
            epochs = {b.node_id: _cluster_of(b).lifecycle.broker_epoch for b in followers}
            assert all(e >= 0 for e in epochs.values())
            index = leader.node_id - 1
            client = cluster.client(index)
            replication = cluster.connect(index, "REPLICATION")
            forged: list[tuple[NodeConnection, int, int, int]] = []
            for f in followers:
                real = epochs[f.node_id]
                forged += [
                    # On the client listener, even with every field right.
                    (client, 12, f.node_id, -1),
                    (client, 15, f.node_id, real),
                    # On the replication listener: no epoch, a wrong one, not a replica.
                    (replication, 12, f.node_id, -1),
                    (replication, 15, f.node_id, -1),
                    (replication, 15, f.node_id, real + 1),
                    (replication, 15, 99, real),
                ]
            own_epoch = _cluster_of(leader).lifecycle.broker_epoch
            forged.append((replication, 15, leader.node_id, own_epoch))
            for connection, version, replica_id, replica_epoch in forged:
                request = _follower_fetch(tp, topic_id, version, replica_id, replica_epoch, 3)
                response = await connection.request(1, version, request, timeout=10)
                (data,) = response.responses[0].partitions
                assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, (version, replica_id)
                assert not data.records
            assert partition.high_watermark == hw
            assert all(r.log_end_offset < 3 for r in partition.remote_replicas.values())
            # The real followers, once fetching again, move it.
            for f in followers:
                state = fetch_states[f.node_id]
                assert state is not None
                _cluster_of(f).fetchers.add_partitions(
                    [FetchState(tp, topic_id, state.leader_id, state.leader_epoch)]
                )
            await wait_until(lambda: partition.high_watermark == 3)
        finally:
            await cluster.stop()

    asyncio.run(scenario())
