"""IncrementalAlterConfigs (key 44), v0-v1.

TOPIC (2) resources: each config entry edits the topic's explicit configs with Kafka's
AlterConfigOp: SET (0) sets a value, DELETE (1) reverts to the default, APPEND (2) and
SUBTRACT (3) add or remove list items (LIST configs such as ``cleanup.policy`` only; they
start from the explicit value, else the config's default). The result is validated and applied
as a whole through ``TopicOperations.incremental_alter_topic_configs``: unknown name, bad value
or APPEND/SUBTRACT on a non-list -> INVALID_CONFIG; an unknown operation, a null value for
anything but DELETE, or a config named twice in one resource -> INVALID_REQUEST; unknown topic
-> UNKNOWN_TOPIC_OR_PARTITION. Changes take effect at once on the hosted partitions.
``validate_only`` checks without changing anything.

BROKER (4): this node's id, or "" for the cluster-wide default; each entry edits that
resource's dynamic broker configs (SET, DELETE, APPEND/SUBTRACT on list properties), checked
as Kafka does (:mod:`pydmq.config.dynamic`), committed as metadata records by the controller
and applied at once (:mod:`pydmq.broker.handlers._broker_configs`); another node id ->
INVALID_REQUEST.
BROKER_LOGGER (8): pydmq has no run-time logger levels, INVALID_REQUEST; other resource types
INVALID_REQUEST. A resource named twice -> INVALID_REQUEST. v1 is flexible.

In cluster mode the request is forwarded to the active controller at the same version and its
response returned (REQUEST_TIMED_OUT per item when no controller answers); a BROKER resource
naming another broker is answered here first (INVALID_REQUEST, as above), as Kafka's broker
does before forwarding.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._broker_configs import (
    alter_broker_configs,
    forward_with_broker_check,
)
from pydmq.broker.handlers._config_resources import check_resource, resource_counts
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["HANDLER"]

_TOPIC = 2
_BROKER = 4
_BROKER_LOGGER = 8


def _handle_local(
    ctx: BrokerContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    broker = ctx.broker
    response = IncrementalAlterConfigsResponse()
    counts = resource_counts(request.resources)
    for resource in request.resources:
        result = AlterConfigsResourceResponse(
            error_code=ErrorCode.NONE,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        response.responses.append(result)
        try:
            check_resource(resource, counts)
            if resource.resource_type == _TOPIC:
                broker.topic_ops.incremental_alter_topic_configs(
                    resource.resource_name,
                    [(c.name, c.config_operation, c.value) for c in resource.configs],
                    request.validate_only,
                )
            elif resource.resource_type == _BROKER:
                alter_broker_configs(
                    broker,
                    resource.resource_name,
                    [(c.name, c.config_operation, c.value) for c in resource.configs],
                    validate_only=request.validate_only,
                    replace=False,
                )
            elif resource.resource_type == _BROKER_LOGGER:
                if resource.resource_name != str(broker.node_id):
                    raise TopicError(
                        ErrorCode.INVALID_REQUEST,
                        f"Unexpected broker id, expected {broker.node_id}, but received "
                        f"{resource.resource_name}",
                    )
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    "Changing logger levels at run time is not supported by pydmq.",
                )
            else:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unsupported resource type: {resource.resource_type}",
                )
        except TopicError as exc:
            result.error_code = exc.error_code
            result.error_message = exc.message
    return response


def handle(
    ctx: BrokerContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse | Awaitable[IncrementalAlterConfigsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return _handle_local(ctx, request)

    def unavailable(code: int, message: str) -> IncrementalAlterConfigsResponse:
        return IncrementalAlterConfigsResponse(
            responses=[
                AlterConfigsResourceResponse(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in request.resources
            ]
        )

    return forward_with_broker_check(
        ctx,
        cluster,
        request,
        unavailable,
        IncrementalAlterConfigsResponse,
        AlterConfigsResourceResponse,
    )


HANDLER = ApiHandlerSpec(44, 0, 1, handle, "IncrementalAlterConfigs")
