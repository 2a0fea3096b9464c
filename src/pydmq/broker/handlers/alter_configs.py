"""AlterConfigs (key 33), v0-v2: the legacy, full-replacement config update.

TOPIC (2) resources: the given configs become the topic's complete set of explicit configs
(anything not named reverts to its default), validated like CreateTopics: unknown name or bad
value -> INVALID_CONFIG, a null value -> INVALID_REQUEST, unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION, a change of the effective ``pydmq.engine`` -> INVALID_CONFIG. The new
set applies at once to the hosted partitions (append policy, min ISR, retention/segment/flush
settings). ``validate_only`` checks without changing anything.

BROKER (4) resources (this node's id, or "" for the cluster-wide default): the given configs
become the resource's complete set of dynamic broker configs
(:mod:`pydmq.broker.handlers._broker_configs`, checked by :mod:`pydmq.config.dynamic`),
committed as metadata records by the controller and applied at once; another node id ->
INVALID_REQUEST. BROKER_LOGGER is not accepted by this
API (Kafka: IncrementalAlterConfigs only) -> INVALID_REQUEST, as is any other type. A resource
named twice in one request, or a config named twice in one resource -> INVALID_REQUEST.
v1 is v0 (throttling), v2 is flexible.

In cluster mode the request is forwarded to the active controller at the same version and its
response returned (REQUEST_TIMED_OUT per item when no controller answers); a BROKER resource
naming another broker is answered here first (INVALID_REQUEST), as Kafka's broker does.
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
from pydmq.config.dynamic import OP_SET
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

__all__ = ["HANDLER"]

_TOPIC = 2
_BROKER = 4


def _handle_local(ctx: BrokerContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    broker = ctx.broker
    response = AlterConfigsResponse()
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
                for config in resource.configs:
                    if config.value is None:
                        raise TopicError(
                            ErrorCode.INVALID_REQUEST,
                            f"Null value not supported for : {config.name}",
                        )
                broker.topic_ops.alter_topic_configs(
                    resource.resource_name,
                    {c.name: c.value for c in resource.configs},
                    request.validate_only,
                )
            elif resource.resource_type == _BROKER:
                alter_broker_configs(
                    broker,
                    resource.resource_name,
                    [(c.name, OP_SET, c.value) for c in resource.configs],
                    validate_only=request.validate_only,
                    replace=True,
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
    ctx: BrokerContext, request: AlterConfigsRequest
) -> AlterConfigsResponse | Awaitable[AlterConfigsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return _handle_local(ctx, request)

    def unavailable(code: int, message: str) -> AlterConfigsResponse:
        return AlterConfigsResponse(
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
        ctx, cluster, request, unavailable, AlterConfigsResponse, AlterConfigsResourceResponse
    )


HANDLER = ApiHandlerSpec(33, 0, 2, handle, "AlterConfigs")
