"""IncrementalAlterConfigs (key 44), v0-v1.

TOPIC (2) resources: each config entry edits the topic's explicit configs with Kafka's
AlterConfigOp: SET (0) sets a value, DELETE (1) reverts to the default, APPEND (2) and
SUBTRACT (3) add or remove list items (LIST configs such as ``cleanup.policy`` only; they
start from the explicit value, else the config's default). The result is validated and applied
as a whole by the controller's ``incremental_alter_configs``: unknown name, bad value or
APPEND/SUBTRACT on a non-list -> INVALID_CONFIG; an unknown operation, a null value for
anything but DELETE, or a config named twice in one resource -> INVALID_REQUEST; unknown topic
-> UNKNOWN_TOPIC_OR_PARTITION. Changes take effect at once on the hosted partitions.
``validate_only`` checks without changing anything.

BROKER (4): this node's id, or "" for the cluster-wide default; each entry edits that
resource's dynamic broker configs (SET, DELETE, APPEND/SUBTRACT on list properties), checked
as Kafka does (:mod:`pydmq.config.dynamic`, in the controller's operation), committed as
metadata records and applied at once on every node; another node id -> INVALID_REQUEST.
BROKER_LOGGER (8): this node's id; SET and DELETE change its logger levels at once, here
(:mod:`pydmq.config.log_levels`: unknown logger or level -> INVALID_CONFIG, DELETE of root,
APPEND or SUBTRACT -> INVALID_REQUEST; ``validate_only`` only checks). Other resource types
INVALID_REQUEST. A resource named twice -> INVALID_REQUEST. v1 is flexible.

Shared with AlterConfigs (:mod:`pydmq.broker.handlers._alter_configs`): the broker's checks,
then TOPIC and BROKER resources go to the controller at the client's version (the active
controller in cluster mode, REQUEST_TIMED_OUT per item when none answers; a single node's
own, in process).
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._alter_configs import (
    BROKER,
    BROKER_LOGGER,
    GROUP,
    TOPIC,
    alter_configs,
)
from pydmq.config.log_levels import LoggerChange, alter_logger_levels
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["HANDLER"]


def handle(
    ctx: BrokerContext, request: IncrementalAlterConfigsRequest
) -> Awaitable[IncrementalAlterConfigsResponse]:
    return alter_configs(
        ctx,
        request.resources,
        null_problem=lambda _r: None,  # the controller's, per operation
        types=frozenset((TOPIC, BROKER, BROKER_LOGGER, GROUP)),
        request_of=lambda resources: IncrementalAlterConfigsRequest(
            resources=resources, validate_only=request.validate_only
        ),
        result=lambda code, message, rtype, name: AlterConfigsResourceResponse(
            error_code=code, error_message=message, resource_type=rtype, resource_name=name
        ),
        response_of=lambda results: IncrementalAlterConfigsResponse(responses=results),
        alter_loggers=lambda resource: _alter_loggers(resource, request.validate_only),
    )


def _alter_loggers(resource: AlterConfigsResource, validate_only: bool) -> None:
    changes = [LoggerChange(c.name, c.config_operation, c.value) for c in resource.configs]
    alter_logger_levels(changes, validate_only)


HANDLER = ApiHandlerSpec(44, 0, 1, handle, "IncrementalAlterConfigs")
