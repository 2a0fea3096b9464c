"""AlterConfigs (key 33), v0-v2: the legacy, full-replacement config update.

TOPIC (2) resources: the given configs become the topic's complete set of explicit configs
(anything not named reverts to its default), validated like CreateTopics: unknown name or bad
value -> INVALID_CONFIG, a null value -> INVALID_REQUEST, unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION, a change of the effective ``pydmq.engine`` -> INVALID_CONFIG. The new
set applies at once to the hosted partitions (append policy, min ISR, retention/segment/flush
settings). ``validate_only`` checks without changing anything.

BROKER (4) resources (this node's id, or "" for the cluster-wide default): the given configs
become the resource's complete set of dynamic broker configs (checked by
:mod:`pydmq.config.dynamic` in the controller's operation), committed as metadata records and
applied at once on every node; another node id -> INVALID_REQUEST. BROKER_LOGGER is not
accepted by this API (Kafka: IncrementalAlterConfigs only) -> INVALID_REQUEST, as is any other
type. A resource named twice in one request, or a config named twice in one resource ->
INVALID_REQUEST. v1 is v0 (throttling), v2 is flexible.

Shared with IncrementalAlterConfigs (:mod:`pydmq.broker.handlers._alter_configs`): the broker's
checks, then TOPIC and BROKER resources go to the controller at the client's version (the
active controller in cluster mode, REQUEST_TIMED_OUT per item when none answers; a single
node's own, in process).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._alter_configs import BROKER, GROUP, TOPIC, alter_configs
from pydmq.protocol.messages.alter_configs import (
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

__all__ = ["HANDLER"]


def _null_problem(resource: AlterConfigsResource) -> str | None:
    for config in resource.configs:
        if config.value is None and resource.resource_type == TOPIC:
            return f"Null value not supported for : {config.name}"
    return None


def handle(ctx: BrokerContext, request: AlterConfigsRequest) -> Awaitable[AlterConfigsResponse]:
    return alter_configs(
        ctx,
        request.resources,
        null_problem=_null_problem,
        types=frozenset((TOPIC, BROKER, GROUP)),
        request_of=lambda resources: AlterConfigsRequest(
            resources=resources, validate_only=request.validate_only
        ),
        result=lambda code, message, rtype, name: AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=rtype, resource_name=name
        ),
        response_of=lambda results: AlterConfigsResponse(responses=results),
    )


HANDLER = ApiHandlerSpec(33, 0, 2, handle, "AlterConfigs")
