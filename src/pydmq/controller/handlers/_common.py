"""What the controller's admin handlers need, and the helpers they share.

:class:`AdminController` is the narrow port the admin handlers (CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs, IncrementalAlterConfigs, ElectLeaders and the partition
reassignment APIs) are written against: a cluster's
:class:`~pydmq.controller.runtime.ControllerRuntime` (over Raft) and a single node's
:class:`~pydmq.controller.local.LocalController` (over its local metadata log) both implement
it, so one handler body serves a broker's forwarded request and a single node's in-process
one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydmq.controller.errors import ControllerError
from pydmq.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.controller.operations import ControllerResult, OperationContext
    from pydmq.metadata.image import MetadataImage

__all__ = ["AdminController", "error_message", "run_operation"]

R = TypeVar("R")


class AdminController(Protocol):
    """A controller the admin handlers run operations on (see the module docstring)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def operation_context(self) -> OperationContext: ...

    async def run(self, operation: Callable[[MetadataImage], ControllerResult[R]]) -> R:
        """Run ``operation`` on the image, one at a time, commit its records and return its
        response; raises :class:`~pydmq.controller.errors.ControllerError`."""
        ...


async def run_operation(
    controller: AdminController, operation: Callable[[MetadataImage], ControllerResult[R]]
) -> tuple[R, ErrorCode, None] | tuple[None, ErrorCode, str]:
    """``(response, NONE, None)``, or ``(None, error, message)`` when the controller cannot
    run the operation (NOT_CONTROLLER), commit it (REQUEST_TIMED_OUT) or store it
    (KAFKA_STORAGE_ERROR). NOT_CONTROLLER and REQUEST_TIMED_OUT carry Kafka's default text,
    other errors the controller's message."""
    try:
        response = await controller.run(operation)
    except ControllerError as exc:
        return None, exc.error_code, error_message(exc.error_code) or exc.message
    return response, ErrorCode.NONE, None


def error_message(code: int) -> str | None:
    """Kafka-style default message for an error code the controller itself produced."""
    if code == ErrorCode.NOT_CONTROLLER:
        return "This is not the correct controller for this cluster."
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return "The request timed out waiting for the metadata log to commit."
    return None
