"""Helpers shared by the controller-listener handlers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pydmq.controller.operations import ControllerResult
from pydmq.controller.runtime import ControllerError
from pydmq.metadata.image import MetadataImage
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["error_message", "run_operation"]

R = TypeVar("R")


async def run_operation(
    runtime: ControllerRuntime, operation: Callable[[MetadataImage], ControllerResult[R]]
) -> tuple[R, ErrorCode, str | None] | tuple[None, ErrorCode, str]:
    """``(response, NONE, None)``, or ``(None, error, message)`` when the controller cannot
    run the operation (NOT_CONTROLLER) or commit it (REQUEST_TIMED_OUT)."""
    try:
        response = await runtime.run(operation)
    except ControllerError as exc:
        return None, exc.error_code, str(exc)
    return response, ErrorCode.NONE, None


def error_message(code: int) -> str | None:
    """Kafka-style default message for an error code the controller itself produced."""
    if code == ErrorCode.NOT_CONTROLLER:
        return "This is not the correct controller for this cluster."
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return "The request timed out waiting for the metadata log to commit."
    return None
