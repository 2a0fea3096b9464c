"""The shape AlterConfigs (33) and IncrementalAlterConfigs (44) share on the controller: run
the config operation over the request's resources and answer each, in request order (or
every one with the controller's error when it cannot run or commit the operation)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from pydmq.controller.handlers._common import AdminController, run_operation

if TYPE_CHECKING:
    from pydmq.controller.operations import (
        ConfigResourceResult,
        ControllerResult,
        OperationContext,
    )
    from pydmq.metadata.image import MetadataImage

__all__ = ["answer_config_resources"]


class _Resource(Protocol):
    resource_type: int
    resource_name: str


WantedT = TypeVar("WantedT")
ResultT = TypeVar("ResultT")


async def answer_config_resources(
    controller: AdminController,
    resources: Sequence[_Resource],
    wanted: Sequence[WantedT],
    validate_only: bool,
    operation: Callable[
        [MetadataImage, OperationContext, Sequence[WantedT], bool],
        ControllerResult[list[ConfigResourceResult]],
    ],
    result: Callable[[int, str | None, int, str], ResultT],
) -> list[ResultT]:
    """``operation(image, context, wanted, validate_only)`` run on ``controller``; one
    ``result(code, message, resource type, name)`` per resource."""
    results, error, message = await run_operation(
        controller,
        lambda image: operation(image, controller.operation_context, wanted, validate_only),
    )
    if results is None:
        return [result(error, message, r.resource_type, r.resource_name) for r in resources]
    return [
        result(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in results
    ]
