"""A cluster broker serves clients only once it is ready: registered, unfenced and serving the
controller's metadata (in-process nodes, see conftest.Cluster)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from pydmq.protocol.messages.metadata import MetadataRequest, MetadataResponse

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.timeout(60)


async def _refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return True
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False


def test_client_listener_opens_only_once_the_broker_is_ready(tmp_path: Path) -> None:
    """Node 1 alone has no quorum: its controller and control-plane listeners accept (the
    node could never become ready otherwise) but its client port refuses, and start() waits.
    Once nodes 2 and 3 run, node 1's start() returns, its client port accepts, and its first
    Metadata answer already names a controller and lists node 1 itself."""

    async def run() -> None:
        cluster = Cluster(tmp_path)
        first = cluster.node(1)
        starting = asyncio.ensure_future(first.start())
        try:
            await wait_until(lambda: {"CONTROLLER", "CONTROL_PLANE"} <= set(first.bound_ports))
            controller_port = first.bound_ports["CONTROLLER"]
            plane_port = first.bound_ports["CONTROL_PLANE"]
            await wait_until(lambda: _accepts(controller_port))
            await wait_until(lambda: _accepts(plane_port))
            await asyncio.sleep(0.5)  # time enough to open it, were it not waiting
            assert not starting.done()
            assert await _refused(cluster.broker_ports[0])
            assert first.broker is not None and first.broker.cluster is not None
            assert not first.broker.cluster.ready.is_set()

            await asyncio.gather(*(n.start() for n in cluster.nodes[1:]))
            await asyncio.wait_for(starting, 30)
            assert first.broker.cluster.ready.is_set()
            assert not await _refused(cluster.broker_ports[0])
            metadata: MetadataResponse = await cluster.client(0).request(
                3, 12, MetadataRequest(topics=None), timeout=10
            )
            assert 1 in {b.node_id for b in metadata.brokers}
            assert metadata.controller_id >= 0
        finally:
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(BaseException):
                    await starting
            await cluster.stop()

    async def _accepts(port: int) -> bool:
        return not await _refused(port)

    asyncio.run(run())


def test_a_node_stopped_while_waiting_for_its_quorum_stops_at_once(tmp_path: Path) -> None:
    """stop() of a node that never became ready (start() cancelled while it waits for a
    quorum): no controlled shutdown to wait for, every port closed."""

    async def run() -> None:
        cluster = Cluster(tmp_path)
        first = cluster.node(1)
        starting = asyncio.ensure_future(first.start())
        await wait_until(lambda: "CONTROL_PLANE" in first.bound_ports)
        await asyncio.sleep(0.5)
        assert not starting.done()  # waiting for a quorum that never comes
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await asyncio.wait_for(first.stop(), 10)
        for port in (cluster.broker_ports[0], first.bound_ports["CONTROL_PLANE"]):
            assert await _refused(port)

    asyncio.run(run())
