"""The broker role of a node built by the composition root, for tests that drive the broker
without starting it (its listeners, start and stop are the :class:`~pydmq.node.Node`'s)."""

from __future__ import annotations

from collections.abc import Iterable

from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.node import Node

__all__ = ["broker_of"]


def broker_of(config: BrokerConfig, plugins: Iterable[object] = ()) -> Broker:
    """A new node's broker (a single node, or a node with the broker role)."""
    broker = Node(config, plugins).broker
    assert broker is not None, "the node has no broker role"
    return broker
