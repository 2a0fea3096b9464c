"""Forwarding of admin requests to the active controller (Kafka's KIP-590 without Envelope).

In cluster mode only the controller changes metadata. CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, IncrementalAlterConfigs, ElectLeaders and partition
reassignments arriving on a broker are sent on, decoded, at the version the client used,
and the controller's response is returned as it is. The broker then learns the result through
UpdateMetadata like every other broker.

The controller answers per item for these APIs, so "this voter is not the controller" is a
response whose every error code is NOT_CONTROLLER; the client then asks the next voter.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydmq.broker.cluster.controller_client import ControllerUnavailableError
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.broker.cluster.runtime import BrokerCluster

__all__ = ["ControllerUnavailableError", "error_codes", "forward", "is_not_controller"]

FORWARD_TIMEOUT_S = 30.0


def error_codes(message: Any) -> Iterator[int]:
    """Every ``error_code`` in a generated message tree (slotted classes and lists)."""
    slots = getattr(type(message), "__slots__", ())
    for name in slots:
        value = getattr(message, name, None)
        if name == "error_code" and isinstance(value, int):
            yield value
        elif isinstance(value, list):
            for item in value:
                if hasattr(type(item), "__slots__"):
                    yield from error_codes(item)
        elif hasattr(type(value), "__slots__") and not isinstance(value, str | bytes | int):
            yield from error_codes(value)


def is_not_controller(response: Any) -> bool:
    codes = list(error_codes(response))
    if not codes:
        return False
    top = getattr(response, "error_code", None)
    if top == ErrorCode.NOT_CONTROLLER:
        return True
    meaningful = [c for c in codes if c != ErrorCode.NONE] if top == ErrorCode.NONE else codes
    return bool(meaningful) and all(c == ErrorCode.NOT_CONTROLLER for c in meaningful)


async def forward(
    cluster: BrokerCluster, api_key: int, version: int, request: Any, timeout_ms: int = 0
) -> Any:
    """The active controller's response to ``request``; raises ControllerUnavailableError.

    ``timeout_ms`` is the client's own request timeout where the API has one (0: default).
    """
    timeout = timeout_ms / 1000 if timeout_ms > 0 else FORWARD_TIMEOUT_S
    return await cluster.controller_client.send(
        api_key, version, request, timeout, not_controller=is_not_controller
    )
