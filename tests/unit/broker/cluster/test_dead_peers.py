"""What a node learns from a peer whose port refuses connections (its process is gone), as
opposed to one that does not answer (paused, cut off): the broker's controller client gives a
controlled shutdown up when a majority of voters refuse, and the controller's channel reports
a broker whose control-plane listener refuses, so the controller fences it at once."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from pydmq.broker.cluster.controller_client import (
    ControllerClient,
    ControllerUnavailableError,
    QuorumLostError,
)
from pydmq.controller.channel_manager import ControllerChannelManager
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import Endpoint, RegisterBrokerRecord
from pydmq.protocol.messages.controlled_shutdown import ControlledShutdownRequest
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.testing.cluster import free_ports

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(60)

CONTROLLED_SHUTDOWN = 7


async def _silent_server() -> tuple[asyncio.Server, int]:
    """A voter that accepts connections and never answers (a paused process)."""

    async def ignore(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(ignore, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


def _request() -> ControlledShutdownRequest:
    return ControlledShutdownRequest(broker_id=3, broker_epoch=5)


def test_quorum_lost_when_a_majority_of_voters_refuse() -> None:
    """Two of three voters refuse (nothing listens), the third is silent: no controller can
    be elected, so a request that requires a quorum fails at once instead of at its 5 s
    timeout."""

    async def run() -> None:
        server, silent = await _silent_server()
        gone = free_ports(2)
        client = ControllerClient(
            {1: ("127.0.0.1", gone[0]), 2: ("127.0.0.1", gone[1]), 3: ("127.0.0.1", silent)},
            client_id="test",
        )
        try:
            began = time.monotonic()
            with pytest.raises(QuorumLostError, match="voters 1,2 of 1,2,3 refuse"):
                await client.send(
                    CONTROLLED_SHUTDOWN, 3, _request(), timeout=5.0, require_quorum=True
                )
            print(f"quorum lost found in {time.monotonic() - began:.3f} s")
        finally:
            await client.close()
            server.close()

    asyncio.run(run())


def test_silent_voters_are_not_counted_as_gone() -> None:
    """One refusing voter and two silent ones (paused, maybe about to answer): a majority may
    still elect a controller, so the request waits out its timeout as before."""

    async def run() -> None:
        servers = [await _silent_server() for _ in range(2)]
        (gone,) = free_ports(1)
        voters = {1: ("127.0.0.1", gone)}
        voters |= {i + 2: ("127.0.0.1", port) for i, (_, port) in enumerate(servers)}
        client = ControllerClient(voters, client_id="test")
        try:
            with pytest.raises(ControllerUnavailableError) as caught:
                await client.send(
                    CONTROLLED_SHUTDOWN, 3, _request(), timeout=1.5, require_quorum=True
                )
            assert not isinstance(caught.value, QuorumLostError)
            assert await client.unreachable_voters(0.5) == [1]
        finally:
            await client.close()
            for server, _ in servers:
                server.close()

    asyncio.run(run())


def test_a_closed_controller_client_fails_requests_at_once() -> None:
    """Shutdown closes the client first: a heartbeat waiting for a controller that is gone
    must end then, not at its timeout."""

    async def run() -> None:
        server, silent = await _silent_server()
        client = ControllerClient({1: ("127.0.0.1", silent)}, client_id="test")
        try:
            waiting = asyncio.ensure_future(
                client.send(CONTROLLED_SHUTDOWN, 3, _request(), timeout=30.0)
            )
            await asyncio.sleep(0.3)
            await client.close()
            with pytest.raises(ControllerUnavailableError, match="closed"):
                await asyncio.wait_for(waiting, 10)
        finally:
            server.close()

    asyncio.run(run())


def test_channel_reports_a_broker_whose_control_plane_listener_refuses() -> None:
    (port,) = free_ports(1)
    record = RegisterBrokerRecord(
        broker_id=7,
        incarnation_id=uuid.uuid4(),
        broker_epoch=4,
        endpoints=(Endpoint("CONTROL_PLANE", "127.0.0.1", port, 0),),
        rack=None,
        fenced=False,
        in_controlled_shutdown=False,
    )
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(record)
    image = delta.apply(offset=4, epoch=1)

    async def run() -> list[tuple[int, int]]:
        refused: list[tuple[int, int]] = []
        manager = ControllerChannelManager(
            controller_id=1,
            controller_epoch=1,
            control_plane_listener_name="CONTROL_PLANE",
            inter_broker_listener_name="PLAINTEXT",
            image_provider=lambda: image,
            on_refused=lambda broker_id, epoch: refused.append((broker_id, epoch)),
        )
        manager.start()
        try:
            deadline = time.monotonic() + 10
            while not refused and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            await manager.stop()
        return refused

    assert asyncio.run(run())[0] == (7, 4)


def test_controller_fences_a_broker_that_refuses_its_channel_before_its_session_ends(
    tmp_path: Path,
) -> None:
    """A broker that stopped heartbeating and whose control-plane listener now refuses
    connections (what kill -9 leaves behind) is fenced as soon as the controller's channel
    finds it so, although its 60 s session has not expired: a new active controller never
    heard from a broker that died with the old one, and used to wait a whole session from
    its activation."""

    async def run() -> None:
        cluster = Cluster(tmp_path, broker_session_timeout_ms=60000)
        try:
            await cluster.start()
            controllers = [b.controller for b in cluster.brokers if b.controller is not None]
            await wait_until(lambda: any(c.is_active for c in controllers))
            active = next(c for c in controllers if c.is_active)
            victim = next(b for b in cluster.brokers if b.node_id != active.node_id)
            assert victim.cluster is not None
            await victim.cluster.lifecycle.stop()  # no more heartbeats
            victim_node = cluster.node(victim.node_id)
            plane = victim_node.bound_ports["CONTROL_PLANE"]
            for server in victim_node._servers:
                if server.sockets and server.sockets[0].getsockname()[1] == plane:
                    server.close()
            for connection in list(victim_node.connections):
                if connection.listener == "CONTROL_PLANE":
                    connection.close()
            # A metadata change: the channel to the victim pushes, finds its connection
            # closed, reconnects and is refused.
            survivor = next(b for b in cluster.brokers if b is not victim)
            created = await cluster.client(survivor.node_id - 1).request(
                19,
                7,
                CreateTopicsRequest(
                    topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=1)],
                    timeout=10000,
                ),
                timeout=15,
            )
            assert created.topics[0].error_code == 0, created
            began = time.monotonic()
            await wait_until(lambda: active.image.brokers[victim.node_id].fenced, timeout=15)
            print(f"fenced {time.monotonic() - began:.3f} s after its listener closed")
        finally:
            await cluster.stop()

    asyncio.run(run())
