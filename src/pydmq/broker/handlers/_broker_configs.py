"""Alteration of a BROKER resource's dynamic configs (IncrementalAlterConfigs and
AlterConfigs share it).

The resource is this node (its id) or the cluster-wide default (""); another name is
INVALID_REQUEST "Unexpected broker id, expected N, but received M" (Kafka 4.4's text), checked
here by the receiving broker in both modes (:func:`check_broker_resource`), as Kafka's broker
checks it before forwarding. The change itself is the controller's: a single node runs the
controller's ``alter_configs``/``incremental_alter_configs`` operation on its
:class:`~pydmq.controller.local.LocalController` (:func:`alter_broker_configs`), whose records
are committed to its metadata log and installed by its publisher
(:mod:`pydmq.broker.dynamic_configs`); a cluster broker forwards the resource to the active
controller with the rest of the request (:func:`forward_with_broker_check`). Runs on the
event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.broker.cluster.runtime import BrokerCluster
    from pydmq.broker.context import BrokerContext
    from pydmq.broker.server import Broker

__all__ = ["alter_broker_configs", "check_broker_resource", "forward_with_broker_check"]

R = TypeVar("R")

_BROKER = 4  # RESOURCE_BROKER, not imported: handler modules load at every start


def check_broker_resource(node_id: int, resource_name: str) -> None:
    """TopicError INVALID_REQUEST unless ``resource_name`` is "" or ``node_id``."""
    if resource_name not in ("", str(node_id)):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {node_id}, but received {resource_name}",
        )


def alter_broker_configs(
    broker: Broker,
    resource_name: str,
    changes: Sequence[tuple[str, int, str | None]],
    *,
    validate_only: bool,
    replace: bool,
) -> None:
    """A single node: apply ``changes`` ((name, AlterConfigOp, value)) to the resource's
    layer through the local controller; ``replace`` (AlterConfigs) starts from an empty
    layer. Raises TopicError with Kafka's code."""
    from pydmq.controller.operations import (
        AlterConfigsResource,
        IncrementalAlterConfigsResource,
        alter_configs,
        incremental_alter_configs,
    )

    check_broker_resource(broker.node_id, resource_name)
    controller = broker.local_controller
    assert controller is not None, "a single node has a local controller"
    context = controller.operation_context
    try:
        if replace:
            layer = {name: value for name, _, value in changes}
            resource = AlterConfigsResource(_BROKER, resource_name, layer)
            [result] = controller.run(
                lambda image: alter_configs(image, context, [resource], validate_only=validate_only)
            )
        else:
            edits = IncrementalAlterConfigsResource(_BROKER, resource_name, changes)
            [result] = controller.run(
                lambda image: incremental_alter_configs(
                    image, context, [edits], validate_only=validate_only
                )
            )
    except KafkaStorageError as exc:
        raise TopicError(
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"Dynamic broker configs could not be persisted: {exc.message}",
        ) from None
    if result.error_code != ErrorCode.NONE:
        raise TopicError(result.error_code, result.error_message or "")


async def forward_with_broker_check(
    ctx: BrokerContext,
    cluster: BrokerCluster,
    request: Any,
    on_unavailable: Callable[[int, str], R],
    response_type: Callable[..., R],
    item_type: Callable[..., Any],
) -> R:
    """Cluster mode: answer the BROKER resources that name another broker here
    (:func:`check_broker_resource`), forward the others to the controller, and give the
    results in the request's order. ``response_type``/``item_type``: the API's response and
    per-resource result classes."""
    refused: dict[int, TopicError] = {}
    for index, resource in enumerate(request.resources):
        if resource.resource_type == _BROKER:
            try:
                check_broker_resource(ctx.broker.node_id, resource.resource_name)
            except TopicError as exc:
                refused[index] = exc
    if not refused:
        return await forward_to_controller(ctx, cluster, request, on_unavailable)
    resources = request.resources
    request.resources = [r for i, r in enumerate(resources) if i not in refused]
    forwarded: list[Any] = []
    try:
        if request.resources:
            answer: Any = await forward_to_controller(ctx, cluster, request, on_unavailable)
            forwarded = list(answer.responses)
    finally:
        request.resources = resources
    answers = iter(forwarded)
    items = [
        item_type(
            error_code=refused[i].error_code,
            error_message=refused[i].message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        if i in refused
        else next(answers)
        for i, r in enumerate(resources)
    ]
    return response_type(responses=items)
