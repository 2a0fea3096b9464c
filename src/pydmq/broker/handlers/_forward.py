"""Admin requests are answered by the controller (:mod:`pydmq.broker.controller_channel`:
the active controller in cluster mode, the node's own in process on a single node).
``forward_to_controller`` sends the decoded request at the client's version and returns the
controller's response; when no controller answers in time (cluster mode),
``on_unavailable(code, message)`` builds the handler's own error response
(REQUEST_TIMED_OUT, as Kafka's forwarding manager answers a timed-out forward).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from pydmq.broker.controller_channel import ControllerUnavailableError
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.broker.context import BrokerContext

__all__ = ["forward_to_controller"]

R = TypeVar("R")


async def forward_to_controller(
    ctx: BrokerContext,
    request: Any,
    on_unavailable: Callable[[int, str], R],
    timeout_ms: int = 0,
) -> R:
    channel = ctx.broker.controller_channel
    try:
        response: R = await channel.send(ctx.api_key, ctx.api_version, request, timeout_ms, ctx)
    except ControllerUnavailableError as exc:
        return on_unavailable(ErrorCode.REQUEST_TIMED_OUT, str(exc))
    return response
