"""Topic hooks in cluster mode (issue 16 part 1: they did not fire at all).

A real cluster of three broker+controller nodes and one broker-only node, in one event loop
over loopback TCP, each node with a plugin recording its hook calls. Every node fires
``pydmq_on_topic_created`` / ``pydmq_on_topic_deleted`` exactly once per change, with the
single node's arguments, after its own partitions of the topic were opened / deleted. As in
single-node mode nothing fires for the start-up state: a restarted node's
``pydmq_broker_startup`` sees the topics that exist (one created while it was down included)
and its hooks report only the changes after that.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pydmq.broker.server import Broker
from pydmq.node import Node
from pydmq.plugins.markers import hookimpl
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest

from .conftest import Cluster
from .conftest import wait_until as _wait_until

pytestmark = pytest.mark.timeout(120)

WAIT_S = 30.0  # only catches a wedge
VOTERS = 3
NODES = VOTERS + 1  # and one broker-only node


async def wait_until(predicate: Callable[[], bool]) -> None:
    await _wait_until(predicate, WAIT_S)


class TopicHookRecorder:
    """A plugin of one node: the topics its broker knew at ``pydmq_broker_startup`` and each
    topic hook call, with the partitions of the topic the node held at that moment and those
    its metadata says it should hold. Called on the node's event loop."""

    def __init__(self) -> None:
        self.broker: Broker | None = None
        self.at_startup: set[str] = set()
        self.calls: list[tuple[Any, ...]] = []

    @hookimpl
    def pydmq_broker_startup(self, broker: Broker) -> None:
        self.broker = broker
        self.at_startup = {topic.name for topic in broker.topics}

    @hookimpl
    def pydmq_on_topic_created(self, topic: str, topic_id: str, partitions: int) -> None:
        self.calls.append(("created", topic, topic_id, partitions, *self._partitions(topic)))

    @hookimpl
    def pydmq_on_topic_deleted(self, topic: str, topic_id: str) -> None:
        self.calls.append(("deleted", topic, topic_id, None, *self._partitions(topic)))

    def _partitions(self, topic: str) -> tuple[frozenset[int], frozenset[int]]:
        """(partitions held here, partitions the metadata places here)."""
        broker = self.broker
        assert broker is not None, "a topic hook fired before pydmq_broker_startup"
        held = frozenset(
            tp.partition for tp in broker.replica_manager.partitions if tp.topic == topic
        )
        info = broker.topics.get(topic)
        placed = frozenset(
            p.index for p in (info.partitions if info else []) if broker.node_id in p.replicas
        )
        return held, placed

    def of(self, topic: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[1] == topic]


async def _create(cluster: Cluster, name: str, partitions: int, rf: int) -> str:
    response = await cluster.client(NODES - 1).request(  # never the restarted node
        19,
        7,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)],
            timeout=10_000,
        ),
    )
    (result,) = response.topics
    assert result.error_code == ErrorCode.NONE, result
    assert result.topic_id != uuid.UUID(int=0)
    return str(result.topic_id)


async def _delete(cluster: Cluster, name: str) -> None:
    response = await cluster.client(NODES - 1).request(  # never the restarted node
        20, 4, DeleteTopicsRequest(topic_names=[name], timeout=10_000)
    )
    (result,) = response.responses
    assert result.error_code == ErrorCode.NONE, result


def test_every_node_fires_the_topic_hooks_once_per_change(tmp_path: Path) -> None:
    recorders = {node: TopicHookRecorder() for node in range(1, NODES + 1)}

    async def scenario() -> None:
        cluster = Cluster(
            tmp_path,
            VOTERS,
            broker_only=NODES - VOTERS,
            plugins={node: [recorder] for node, recorder in recorders.items()},
        )
        try:
            await cluster.start()
            hooked_id = await _create(cluster, "hooked", 4, 2)
            await wait_until(lambda: all(r.of("hooked") for r in recorders.values()))
            await _delete(cluster, "hooked")
            await wait_until(lambda: all(len(r.of("hooked")) == 2 for r in recorders.values()))
            # A later change seen everywhere: any repeated call would have come before it.
            later_id = await _create(cluster, "later", 1, 1)
            await wait_until(lambda: all(r.of("later") for r in recorders.values()))

            held_total = 0
            for node, recorder in recorders.items():
                assert "hooked" not in recorder.at_startup
                created, deleted = recorder.of("hooked")
                kind, topic, topic_id, partitions, held, placed = created
                assert (kind, topic, topic_id, partitions) == ("created", "hooked", hooked_id, 4)
                assert held == placed, node  # after this node's logs of it exist
                held_total += len(held)
                assert deleted == ("deleted", "hooked", hooked_id, None, frozenset(), frozenset())
                assert recorder.of("later") == [
                    ("created", "later", later_id, 1, *recorder.of("later")[0][4:])
                ]
            assert held_total == 4 * 2  # every replica of the topic, once

            # A restarted node (a voter, not the active controller, so that creating topics
            # does not wait for an election): what exists at its start-up is its state.
            voters = [b.controller for b in cluster.brokers if b.controller is not None]
            await wait_until(
                lambda: (
                    len({v.active_controller_id for v in voters}) == 1
                    and voters[0].active_controller_id > 0
                )
            )
            active = voters[0].active_controller_id
            stopped = next(n for n in range(1, VOTERS + 1) if n != active)
            old = cluster.nodes[stopped - 1]
            await old.stop()
            while_down_id = await _create(cluster, "while-down", 1, 1)
            await wait_until(
                lambda: all(r.of("while-down") for n, r in recorders.items() if n != stopped)
            )
            restarted = TopicHookRecorder()
            node = Node(old.config, plugins=[restarted])
            assert node.broker is not None
            cluster.nodes[stopped - 1] = node
            cluster.brokers[stopped - 1] = node.broker
            await asyncio.wait_for(node.start(), 30)
            assert {"later", "while-down"} <= restarted.at_startup
            after_id = await _create(cluster, "after-restart", 1, 1)
            running = [r for n, r in recorders.items() if n != stopped] + [restarted]
            await wait_until(lambda: all(r.of("after-restart") for r in running))
            news = {"while-down", "after-restart"}
            # The stopped node reported nothing of what happened after its stop.
            assert [c for c in recorders[stopped].calls if c[1] in news] == []
            # The restarted one only what happened after its start-up.
            assert [c[:4] for c in restarted.calls if c[1] in news | {"hooked", "later"}] == [
                ("created", "after-restart", after_id, 1)
            ]
            for n, recorder in recorders.items():
                if n != stopped:
                    assert [c[:4] for c in recorder.calls if c[1] in news] == [
                        ("created", "while-down", while_down_id, 1),
                        ("created", "after-restart", after_id, 1),
                    ], n
        finally:
            await cluster.stop()

    asyncio.run(scenario())
