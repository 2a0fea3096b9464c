"""The composition root builds the roles a node has, and only those.

A controller-only node (``process.roles=controller``) has no broker role: no replica manager,
no group coordinator, no single node's local metadata log under ``__pydmq_metadata`` (it built
all three before the Node existed), and the broker hooks do not fire on it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.node import Node
from pydmq.plugins.markers import hookimpl
from pydmq.testing.ports import free_port

pytestmark = pytest.mark.timeout(60)


class _BrokerHooks:
    """Records the broker lifecycle hooks it sees (called on the node's loop)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def pydmq_broker_startup(self, broker: object) -> None:
        self.calls.append("startup")

    @hookimpl
    def pydmq_broker_shutdown(self, broker: object) -> None:
        self.calls.append("shutdown")


def test_a_controller_only_node_has_no_broker_role(tmp_path: Path) -> None:
    port = free_port()
    config = BrokerConfig(
        {
            "node.id": 1,
            "process.roles": "controller",
            "controller.quorum.voters": f"1@127.0.0.1:{port}",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "pydmq.http.listeners": "http://127.0.0.1:0",
            "log.dirs": str(tmp_path),
        }
    )
    hooks = _BrokerHooks()
    node = Node(config, plugins=[hooks])
    assert node.broker is None and node.controller is not None
    assert node.dispatcher_for("CONTROLLER") is node.controller_dispatcher
    assert not (tmp_path / "__pydmq_metadata" / "metadata-log").exists()

    async def run() -> None:
        await asyncio.wait_for(node.start(), 30)
        assert node.bound_ports["CONTROLLER"] == port
        await asyncio.wait_for(node.stop(), 30)

    asyncio.run(run())
    assert not (tmp_path / "__pydmq_metadata" / "metadata-log").exists()
    assert hooks.calls == []


def test_a_single_node_is_a_broker_and_its_own_controller(tmp_path: Path) -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "pydmq.http.listeners": "http://127.0.0.1:0",
            "log.dirs": str(tmp_path),
        }
    )
    hooks = _BrokerHooks()
    node = Node(config, plugins=[hooks])
    assert node.controller is None  # no quorum: the broker's local controller
    assert node.broker is not None and node.broker.local_controller is not None
    assert (tmp_path / "__pydmq_metadata" / "metadata-log").is_dir()

    async def run() -> None:
        await asyncio.wait_for(node.start(), 30)
        host, port = node.bootstrap().split(":")
        assert (host, int(port)) == ("127.0.0.1", node.bound_ports["PLAINTEXT"])
        await asyncio.wait_for(node.stop(), 30)

    asyncio.run(run())
    assert hooks.calls == ["startup", "shutdown"]
