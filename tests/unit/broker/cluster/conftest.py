"""An in-process cluster: N pydmq nodes (broker + controller) on one event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.net.client import NodeConnection
from pydmq.node import Node
from pydmq.testing.ports import free_port


class Cluster:
    """Nodes 1..n (broker + controller), then ``broker_only`` nodes n+1.. with the broker role
    only; ``nodes[i]`` is node i+1 and ``brokers[i]`` its broker role. With ``replication_listener`` followers fetch on a
    REPLICATION listener of their own (``inter.broker.listener.name``), apart from the
    clients' PLAINTEXT one. ``plugins`` maps a node id to the plugins of that node's host.
    Use inside one ``asyncio.run``."""

    def __init__(
        self,
        root: Path,
        n: int = 3,
        *,
        broker_only: int = 0,
        replication_listener: bool = False,
        plugins: Mapping[int, Sequence[object]] | None = None,
        **overrides: object,
    ) -> None:
        total = n + broker_only
        self.broker_ports = [free_port() for _ in range(total)]
        self.replication_ports = [free_port() for _ in range(total)]
        controller_ports = [free_port() for _ in range(n)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{controller_ports[i]}" for i in range(n))
        self.nodes: list[Node] = []
        self.brokers: list[Broker] = []
        for i in range(total):
            listeners = [f"PLAINTEXT://127.0.0.1:{self.broker_ports[i]}"]
            if i < n:
                listeners.append(f"CONTROLLER://127.0.0.1:{controller_ports[i]}")
            values: dict[str, object] = {
                "node.id": i + 1,
                "process.roles": "broker,controller" if i < n else "broker",
                "listeners": ",".join(listeners),
                "pydmq.http.listeners": "http://127.0.0.1:0",  # never a fixed port in tests
                "controller.quorum.voters": voters,
                "log.dirs": str(root / f"node{i + 1}"),
                "broker.heartbeat.interval.ms": 200,
                "broker.session.timeout.ms": 3000,
                "controller.quorum.election.timeout.ms": 300,
                "controller.quorum.fetch.timeout.ms": 600,
                "replica.fetch.wait.max.ms": 100,
                "replica.lag.time.max.ms": 2000,
            }
            if replication_listener:
                values["listeners"] = (
                    f"{values['listeners']},REPLICATION://127.0.0.1:{self.replication_ports[i]}"
                )
                values["inter.broker.listener.name"] = "REPLICATION"
                values["listener.security.protocol.map"] = (
                    "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT"
                )
            values.update({k.replace("_", "."): v for k, v in overrides.items()})
            node_plugins = () if plugins is None else plugins.get(i + 1, ())
            node = Node(BrokerConfig(values), plugins=node_plugins)
            assert node.broker is not None
            self.nodes.append(node)
            self.brokers.append(node.broker)
        self.connections: list[NodeConnection] = []

    async def start(self, timeout: float = 20.0) -> None:
        await asyncio.gather(*(n.start() for n in self.nodes))
        await asyncio.wait_for(
            asyncio.gather(
                *(b.cluster.lifecycle.unfenced.wait() for b in self.brokers if b.cluster)
            ),
            timeout,
        )

    def client(self, index: int) -> NodeConnection:
        conn = NodeConnection("127.0.0.1", self.broker_ports[index], client_id="cluster-test")
        self.connections.append(conn)
        return conn

    def connect(self, index: int, listener: str) -> NodeConnection:
        """A connection to one of node ``index + 1``'s listeners, by name."""
        port = self.nodes[index].bound_ports[listener]
        conn = NodeConnection("127.0.0.1", port, client_id=f"cluster-test-{listener.lower()}")
        self.connections.append(conn)
        return conn

    def broker(self, node_id: int) -> Broker:
        return self.brokers[node_id - 1]

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    async def stop(self) -> None:
        for conn in self.connections:
            await conn.close()
        await asyncio.gather(*(n.stop() for n in self.nodes), return_exceptions=True)


async def wait_until(
    predicate: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0, every: float = 0.05
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result: Any = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(every)
