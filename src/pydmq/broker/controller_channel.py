"""ControllerChannel: how a broker reaches its controller with an admin request.

Kafka's shape: a broker does not change metadata itself, it sends the admin request to its
controller. In cluster mode that is the active controller, over the network
(:mod:`pydmq.broker.cluster.forwarding`: the decoded request at the client's version, the
controller's response as it is). A single node is a combined broker and controller: the
request object goes, in process and at the client's version (no encoding), to the same
controller handlers (:func:`pydmq.controller.handlers.admin.admin_handler_specs`) bound to the
node's :class:`~pydmq.controller.local.LocalController`; those handlers and the operations
are imported on the first admin request, not at start-up.

Owned by the broker; used on its event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from pydmq.api.handler import RequestContext

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.broker.server import Broker
    from pydmq.controller.local import LocalController

__all__ = ["ControllerChannel", "ControllerUnavailableError"]


class ControllerUnavailableError(ConnectionError):
    """No voter accepted the request as the active controller before the deadline (cluster
    mode; a single node's own controller always answers)."""


class ControllerChannel:
    """Sends admin requests to the broker's controller (see the module docstring)."""

    def __init__(self, broker: Broker, local: LocalController | None) -> None:
        self._broker = broker
        self._local = local
        self._local_specs: dict[int, ApiHandlerSpec] | None = None

    def send(
        self,
        api_key: int,
        version: int,
        request: Any,
        timeout_ms: int = 0,
        ctx: RequestContext[Any] | None = None,
    ) -> Awaitable[Any]:
        """The controller's response to ``request`` (``ctx``: the client's request it serves,
        None for the broker's own). Cluster mode raises ``ControllerUnavailableError`` when no
        controller answers within ``timeout_ms`` (0: the default)."""
        if self._local is None:
            # Imported here: the cluster code only in cluster mode (start-up time).
            from pydmq.broker.cluster.forwarding import forward

            cluster = self._broker.cluster
            assert cluster is not None  # a broker role without a local controller
            return forward(cluster, api_key, version, request, timeout_ms)
        if ctx is None:
            ctx = RequestContext(self._broker, api_key, version, 0, "pydmq-broker", "", 0, "", 0)
        handled: Awaitable[Any] = self._local_handler(api_key).handle(ctx, request)
        return handled

    def _local_handler(self, api_key: int) -> ApiHandlerSpec:
        if self._local_specs is None:
            from pydmq.controller.handlers.admin import admin_handler_specs

            assert self._local is not None
            self._local_specs = admin_handler_specs(self._local)
        return self._local_specs[api_key]
