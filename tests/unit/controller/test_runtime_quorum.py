"""Three ControllerRuntimes in one event loop over real loopback TCP.

Each node serves its controller handlers through a RequestDispatcher on its own port, as the
Broker does on a CONTROLLER listener. The tests elect a leader, commit records through the
operation path, lose the leader, restart from disk (log, quorum state and snapshots), and watch
the channel manager push FULL and incremental state to a fake broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pydmq.api.dispatcher import RequestDispatcher
from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.config.broker import BrokerConfig
from pydmq.controller.operations import (
    ControllerResult,
    CreatableTopic,
    broker_heartbeat,
    create_topics,
    register_broker,
)
from pydmq.controller.runtime import ControllerRuntime, NotControllerError
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import Endpoint, FeatureLevelRecord
from pydmq.net.client import NodeConnection
from pydmq.net.connection import KafkaConnection
from pydmq.plugins.host import PluginHost
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.api_versions import ApiVersionsResponse
from pydmq.protocol.messages.broker_registration import BrokerRegistrationRequest
from pydmq.protocol.messages.describe_quorum import DescribeQuorumRequest, PartitionData, TopicData
from pydmq.protocol.messages.leader_and_isr import LeaderAndIsrResponse
from pydmq.protocol.messages.stop_replica import StopReplicaResponse
from pydmq.protocol.messages.update_metadata import UpdateMetadataResponse
from pydmq.testing.ports import free_port

pytestmark = pytest.mark.timeout(30)


class _Host:
    """What ControllerRuntime needs from a Broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.cluster_id = "test-cluster"
        self.plugins = PluginHost(load_entry_points=False)
        self.node_id = config.node_id


class _Server:
    """A listening socket whose dispatcher can be swapped (a node restarting on its port)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.dispatcher: RequestDispatcher | None = None
        self.server: asyncio.base_events.Server | None = None
        self.connections: set[KafkaConnection] = set()

    async def start(self, dispatcher: RequestDispatcher) -> None:
        self.dispatcher = dispatcher
        loop = asyncio.get_running_loop()

        def factory() -> KafkaConnection:
            assert self.dispatcher is not None
            conn = KafkaConnection(
                self.dispatcher, 64 << 20, "CONTROLLER", on_close=self.connections.discard
            )
            self.connections.add(conn)
            return conn

        self.server = await loop.create_server(
            factory, host="127.0.0.1", port=self.port, reuse_address=True
        )

    async def stop(self) -> None:
        if self.server is None:
            return
        self.server.close()
        for conn in list(self.connections):
            conn.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.server.wait_closed(), 2)
        self.server = None


class Cluster:
    def __init__(self, root: Path, n: int = 3, **overrides: object) -> None:
        self.root = root
        self.ports = {i: free_port() for i in range(1, n + 1)}
        self.overrides = overrides
        self.runtimes: dict[int, ControllerRuntime] = {}
        self.servers: dict[int, _Server] = {}

    def config(self, node_id: int) -> BrokerConfig:
        values: dict[str, object] = {
            "node.id": node_id,
            "process.roles": ["controller"],
            "controller.quorum.voters": [f"{i}@127.0.0.1:{p}" for i, p in self.ports.items()],
            "listeners": [f"CONTROLLER://127.0.0.1:{self.ports[node_id]}"],
            "log.dirs": [str(self.root / f"node-{node_id}")],
            "controller.quorum.election.timeout.ms": 300,
            "controller.quorum.fetch.timeout.ms": 600,
            "controller.quorum.election.backoff.max.ms": 200,
        }
        values.update(self.overrides)
        return BrokerConfig(values)

    async def start_node(self, node_id: int) -> ControllerRuntime:
        host = _Host(self.config(node_id))
        runtime = ControllerRuntime(host)
        dispatcher = RequestDispatcher(host, runtime.handler_specs(), ApiVersionsResponse)
        server = self.servers.get(node_id) or _Server(self.ports[node_id])
        self.servers[node_id] = server
        await server.start(dispatcher)
        await runtime.start()
        self.runtimes[node_id] = runtime
        return runtime

    async def stop_node(self, node_id: int) -> None:
        runtime = self.runtimes.pop(node_id)
        await runtime.stop()
        await self.servers[node_id].stop()

    async def start(self) -> None:
        for node_id in self.ports:
            await self.start_node(node_id)

    async def stop(self) -> None:
        for node_id in list(self.runtimes):
            await self.stop_node(node_id)

    async def active(self, timeout: float = 8.0) -> ControllerRuntime:
        """The one active controller, once there is exactly one."""

        def one() -> ControllerRuntime | None:
            active = [r for r in self.runtimes.values() if r.is_active]
            return active[0] if len(active) == 1 else None

        active: ControllerRuntime = await wait_for(one, timeout, "an active controller")
        return active


async def wait_for(
    probe: Callable[[], Any], timeout: float, what: str, interval: float = 0.02
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = probe()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def run(coro_fn: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), 25))


def _feature(name: str, level: int) -> Callable[[MetadataImage], ControllerResult[str]]:
    return lambda image: ControllerResult([FeatureLevelRecord(name, level)], "done")


def test_elects_one_leader_and_commits_everywhere(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.start()
        try:
            leader = await cluster.active()
            assert leader.active_controller_id == leader.node_id
            assert await leader.run(_feature("test.a", 3)) == "done"
            assert leader.image.features["test.a"] == 3
            # The active controller also wrote metadata.version when it became active.
            await wait_for(
                lambda: all(
                    r.image.features.get("test.a") == 3 and "metadata.version" in r.image.features
                    for r in cluster.runtimes.values()
                ),
                5,
                "the record on every voter",
            )
            for r in cluster.runtimes.values():
                assert r.active_controller_id == leader.node_id
                if r is not leader:
                    assert not r.is_active
                    with pytest.raises(NotControllerError):
                        await r.run(_feature("test.b", 1))
        finally:
            await cluster.stop()

    run(scenario)


def test_wire_apis_on_the_controller_listener(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.start()
        try:
            leader = await cluster.active()
            follower = next(i for i in cluster.runtimes if i != leader.node_id)
            conn = NodeConnection("127.0.0.1", cluster.ports[follower], client_id="test")
            try:
                registration = BrokerRegistrationRequest(
                    broker_id=7, cluster_id="test-cluster", incarnation_id=uuid.uuid4()
                )
                answer = await conn.request(62, 4, registration)
                assert answer.error_code == ErrorCode.NOT_CONTROLLER
                describe = DescribeQuorumRequest(
                    topics=[
                        TopicData(
                            topic_name="__cluster_metadata",
                            partitions=[PartitionData(partition_index=0)],
                        )
                    ]
                )
                quorum = await conn.request(55, 2, describe)
                part = quorum.topics[0].partitions[0]
                # A follower is not the one to describe the quorum, but knows the leader.
                assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                assert part.leader_id == leader.node_id
                assert sorted(n.node_id for n in quorum.nodes) == [1, 2, 3]
            finally:
                await conn.close()
            conn = NodeConnection("127.0.0.1", cluster.ports[leader.node_id], client_id="test")
            try:
                stranger = BrokerRegistrationRequest(
                    broker_id=8, cluster_id="another-cluster", incarnation_id=uuid.uuid4()
                )
                answer = await conn.request(62, 4, stranger)
                assert answer.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
                answer = await conn.request(62, 4, registration)
                assert answer.error_code == ErrorCode.NONE
                assert answer.broker_epoch > 0
                quorum = await conn.request(55, 2, describe)
                part = quorum.topics[0].partitions[0]
                assert part.error_code == ErrorCode.NONE
                assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
                assert part.high_watermark > 0
            finally:
                await conn.close()
            assert 7 in leader.image.brokers and leader.image.brokers[7].fenced
        finally:
            await cluster.stop()

    run(scenario)


def test_survives_losing_the_leader(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path)
        await cluster.start()
        try:
            first = await cluster.active()
            await first.run(_feature("before", 1))
            old_epoch = first.epoch
            await cluster.stop_node(first.node_id)
            loop = asyncio.get_running_loop()
            started = loop.time()
            second = await cluster.active(timeout=5)
            assert loop.time() - started < 5
            assert second.node_id != first.node_id
            assert second.epoch > old_epoch
            assert second.image.features["before"] == 1
            await second.run(_feature("after", 2))
            await wait_for(
                lambda: all(r.image.features.get("after") == 2 for r in cluster.runtimes.values()),
                5,
                "the new leader's record on the remaining voter",
            )
            # The old leader comes back as a follower and catches up.
            back = await cluster.start_node(first.node_id)
            await wait_for(lambda: back.image.features.get("after") == 2, 5, "catch-up")
            assert not back.is_active
        finally:
            await cluster.stop()

    run(scenario)


def test_restarts_from_disk_with_snapshots(tmp_path: Path) -> None:
    async def scenario() -> None:
        cluster = Cluster(tmp_path, **{"metadata.log.max.snapshot.interval.records": 5})
        await cluster.start()
        try:
            leader = await cluster.active()
            for level in range(1, 13):
                await leader.run(_feature("counter", level))
            await wait_for(
                lambda: all(
                    r.image.features.get("counter") == 12 for r in cluster.runtimes.values()
                ),
                5,
                "every voter applied the counter",
            )
            offset = leader.image.offset
        finally:
            await cluster.stop()
        snapshots = list((tmp_path / "node-1" / "__cluster_metadata-0").glob("*.checkpoint"))
        snapshots += list((tmp_path / "node-1" / "__cluster_metadata-0").glob("*snapshot*"))
        assert snapshots, "a snapshot file was written"

        await cluster.start()
        try:
            # Each node loads its snapshot at start, before any leader is known.
            for r in cluster.runtimes.values():
                assert r.image.features.get("counter", 0) >= 5
            leader = await cluster.active()
            await wait_for(
                lambda: all(r.image.offset > offset for r in cluster.runtimes.values()),
                5,
                "the restarted quorum to commit past the old end",
            )
            assert all(r.image.features["counter"] == 12 for r in cluster.runtimes.values())
            await leader.run(_feature("counter", 13))
            assert leader.image.features["counter"] == 13
        finally:
            await cluster.stop()

    run(scenario)


def test_channel_manager_pushes_full_then_incremental_state(tmp_path: Path) -> None:
    async def scenario() -> None:
        received: list[tuple[int, Any]] = []

        def handler(key: int, response: Any) -> ApiHandlerSpec:
            def handle(ctx: RequestContext[None], request: Any) -> Any:
                received.append((key, request))
                return response

            version = {4: 7, 5: 4, 6: 8}[key]
            return ApiHandlerSpec(key, version, version, handle)

        fake_broker = _Server(free_port())
        await fake_broker.start(
            RequestDispatcher(
                None,
                {
                    4: handler(4, LeaderAndIsrResponse()),
                    5: handler(5, StopReplicaResponse()),
                    6: handler(6, UpdateMetadataResponse()),
                },
                ApiVersionsResponse,
            )
        )
        cluster = Cluster(tmp_path, **{"broker.session.timeout.ms": 1500})
        await cluster.start()
        try:
            leader = await cluster.active()
            # Pushes go to the control-plane endpoint only; LeaderAndIsr names the leaders'
            # inter-broker (PLAINTEXT) endpoints, where nothing listens here.
            client_port = free_port()
            endpoints = [
                Endpoint("PLAINTEXT", "127.0.0.1", client_port, 0),
                Endpoint("CONTROL_PLANE", "127.0.0.1", fake_broker.port, 0),
            ]
            reply = await leader.run(
                lambda image: register_broker(
                    image,
                    leader.operation_context,
                    broker_id=1,
                    incarnation_id=uuid.uuid4(),
                    endpoints=endpoints,
                    rack=None,
                )
            )
            epoch = reply.broker_epoch
            await wait_for(
                lambda: any(k == 6 and r.type_ == 2 for k, r in received),
                5,
                "a FULL UpdateMetadata",
            )
            full = [r for k, r in received if k == 4]
            assert full and full[0].type_ == 2 and full[0].controller_epoch == leader.epoch
            um = next(r for k, r in received if k == 6)
            assert um.metadata_offset >= epoch
            # The broker heartbeats with that offset and is unfenced; then a topic is created.
            leader.record_heartbeat(1, epoch)
            beat = await leader.run(
                lambda image: broker_heartbeat(
                    image,
                    leader.operation_context,
                    broker_id=1,
                    broker_epoch=epoch,
                    current_metadata_offset=um.metadata_offset,
                )
            )
            assert not beat.is_fenced
            results = await leader.run(
                lambda image: create_topics(
                    image, leader.operation_context, [CreatableTopic("orders", 2, 1)]
                )
            )
            assert results[0].error_code == ErrorCode.NONE
            await wait_for(
                lambda: any(
                    k == 4
                    and r.type_ == 1
                    and r.topic_states
                    and r.topic_states[0].topic_name == "orders"
                    for k, r in received
                ),
                5,
                "an incremental LeaderAndIsr for the new topic",
            )
            lai = next(r for k, r in received if k == 4 and r.type_ == 1)
            assert [p.leader for p in lai.topic_states[0].partition_states] == [1, 1]
            assert [(ll.broker_id, ll.port) for ll in lai.live_leaders] == [(1, client_port)]
            # No more heartbeats: the broker is fenced after the session timeout.
            await wait_for(
                lambda: leader.image.brokers[1].fenced, 6, "fencing of the silent broker"
            )
        finally:
            await cluster.stop()
            await fake_broker.stop()

    run(scenario)
