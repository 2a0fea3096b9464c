"""What the metrics and health endpoints read of a node (the node implements it; this
package sits below the node and never imports it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pydmq.api.dispatcher import RequestDispatcher
    from pydmq.broker.server import Broker
    from pydmq.config.broker import BrokerConfig
    from pydmq.controller.runtime import ControllerRuntime
    from pydmq.security.sasl.listener import SaslListener

__all__ = ["NodeView"]


class NodeView(Protocol):
    """A node's roles and state, read on its event loop."""

    node_id: int
    cluster_id: str
    config: BrokerConfig
    broker: Broker | None
    controller: ControllerRuntime | None
    controller_dispatcher: RequestDispatcher[Any] | None

    @property
    def sasl_listeners(self) -> Mapping[str, SaslListener]:
        """Listener name -> its SASL login factory (empty without SASL listeners)."""
        ...

    @property
    def serving_clients(self) -> bool:
        """True once the client listeners serve (start completed), False again at stop."""
        ...
