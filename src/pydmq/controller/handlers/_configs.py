"""The shape AlterConfigs (33) and IncrementalAlterConfigs (44) share on the controller: run
the config operation over the request's resources and answer each, in request order (or
every one with the controller's error when it cannot run or commit the operation)."""

from __future__ import annotations

from collections.abc import Sequence
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


WantedT = TypeVar("WantedT", contravariant=True)
ResultT = TypeVar("ResultT", covariant=True)


class _ConfigOperation(Protocol[WantedT]):
    """:func:`~pydmq.controller.operations.alter_configs` or its incremental twin."""

    def __call__(
        self,
        image: MetadataImage,
        ctx: OperationContext,
        resources: Sequence[WantedT],
        /,
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[ConfigResourceResult]]: ...


class _ResourceResponse(Protocol[ResultT]):
    """The generated ``AlterConfigsResourceResponse`` of AlterConfigs or
    IncrementalAlterConfigs."""

    def __call__(
        self, *, error_code: int, error_message: str | None, resource_type: int, resource_name: str
    ) -> ResultT: ...


async def answer_config_resources(
    controller: AdminController,
    resources: Sequence[_Resource],
    wanted: Sequence[WantedT],
    validate_only: bool,
    operation: _ConfigOperation[WantedT],
    response: _ResourceResponse[ResultT],
) -> list[ResultT]:
    """``operation(image, context, wanted, validate_only=...)`` run on ``controller``; one
    ``response`` per resource."""
    results, error, message = await run_operation(
        controller,
        lambda image: operation(
            image, controller.operation_context, wanted, validate_only=validate_only
        ),
    )
    answers = (
        [(error, message, r.resource_type, r.resource_name) for r in resources]
        if results is None
        else [(r.error_code, r.error_message, r.resource_type, r.resource_name) for r in results]
    )
    return [
        response(error_code=code, error_message=text, resource_type=rtype, resource_name=name)
        for code, text, rtype, name in answers
    ]
