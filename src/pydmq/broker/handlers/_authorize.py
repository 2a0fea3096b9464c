"""The one way the broker's handlers ask the authorizer, as Kafka's AuthHelper.

Every check is a one-line call from a handler: :func:`authorized` (one resource),
:func:`authorized_names` (the names of a request allowed, asked once per distinct name),
:func:`authorized_cluster` (the CLUSTER resource ``kafka-cluster``),
:func:`authorized_by_resource_type`, and Kafka's compound rules: CREATE on the cluster or the
topic (:func:`authorized_to_create_topic`), a config resource's topic or cluster
(:func:`config_resource_refusal`), the ``*_authorized_operations`` bit sets
(:func:`authorized_operations`, :func:`cluster_authorized_operations`). The request's principal and client address come from
its :class:`~pydmq.api.handler.RequestContext`. Without an authorizer
(``authorizer.class.name`` empty) everything is allowed, as Kafka. A request the node
dispatches to itself in process (listener ``""``: a single node's transaction markers, its
admin requests to its own controller) is the node acting, allowed as a super user.

Called on the event loop; the authorizer caches its decisions, so the Produce and Fetch
paths pay one dict lookup per topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final, TypeVar

from pydmq.broker.context import BrokerContext
from pydmq.protocol.acl import CLUSTER_NAME, CLUSTER_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode

__all__ = [
    "IN_PROCESS",
    "authorized",
    "authorized_by_resource_type",
    "authorized_cluster",
    "authorized_items",
    "authorized_names",
    "authorized_operations",
    "authorized_to_create_topic",
    "cluster_authorized_operations",
    "config_resource_refusal",
]

T = TypeVar("T")

IN_PROCESS: Final = ""
"""The listener name of a request the node dispatches to itself."""


def authorized(
    ctx: BrokerContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """Whether the request's principal may do ``operation`` on resource ``name``."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.listener == IN_PROCESS:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def authorized_cluster(ctx: BrokerContext, operation: AclOperation) -> bool:
    """Whether the request's principal may do ``operation`` on the cluster."""
    return authorized(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_names(
    ctx: BrokerContext,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
) -> set[str]:
    """The names among ``names`` the principal may do ``operation`` on."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.listener == IN_PROCESS:
        return set(names)
    principal, host = ctx.principal, ctx.client_host
    return {
        name
        for name in set(names)
        if authorizer.authorize(principal, host, operation, resource_type, name)
    }


def authorized_items(
    ctx: BrokerContext,
    operation: AclOperation,
    resource_type: ResourceType,
    items: Sequence[T],
    name_of: Callable[[T], str],
) -> Sequence[T]:
    """The items whose resource (``name_of(item)``) the principal may do ``operation`` on, in
    order; ``items`` itself without an authorizer (no copy: "all topics" of a large node)."""
    if ctx.broker.authorizer is None or ctx.listener == IN_PROCESS:
        return items
    allowed = authorized_names(ctx, operation, resource_type, (name_of(i) for i in items))
    return [item for item in items if name_of(item) in allowed]


def authorized_by_resource_type(
    ctx: BrokerContext, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Whether the principal may do ``operation`` on some resource of ``resource_type``."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.listener == IN_PROCESS:
        return True
    return authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client_host, operation, resource_type
    )


def authorized_to_create_topic(ctx: BrokerContext, name: str) -> bool:
    """CREATE on the cluster, or on the topic (Kafka's rule for CreateTopics and for
    auto-creation by Metadata)."""
    return authorized_cluster(ctx, AclOperation.CREATE) or authorized(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


_CONFIG_TOPIC = 2  # Kafka's ConfigResource.Type TOPIC; BROKER (4) and BROKER_LOGGER (8) are
# the cluster's
_CONFIG_GROUP = 32  # Kafka's ConfigResource.Type GROUP: the group's


def config_resource_refusal(
    ctx: BrokerContext, resource_type: int, name: str, operation: AclOperation
) -> int:
    """The error a config resource gets when the principal may not do ``operation``
    (DESCRIBE_CONFIGS, ALTER_CONFIGS) on it: a topic's on the topic, a group's on the group,
    a broker's on the cluster; 0 when it may."""
    if resource_type == _CONFIG_TOPIC:
        allowed = authorized(ctx, operation, ResourceType.TOPIC, name)
        return 0 if allowed else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == _CONFIG_GROUP:
        allowed = authorized(ctx, operation, ResourceType.GROUP, name)
        return 0 if allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return 0 if authorized_cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def authorized_operations(
    ctx: BrokerContext, resource_type: ResourceType, name: str, supported: int
) -> int:
    """The ``*_authorized_operations`` bit set of a resource: the operations of ``supported``
    (a bit set) the principal may do on it (all of them without an authorizer), as Kafka's
    AuthHelper.authorizedOperations."""
    return sum(
        1 << op
        for op in AclOperation
        if supported >> op & 1 and authorized(ctx, op, resource_type, name)
    )


def cluster_authorized_operations(ctx: BrokerContext) -> int:
    """The ``cluster_authorized_operations`` bit set: the CLUSTER operations the principal may
    do, 0 when it may not DESCRIBE the cluster (as Kafka)."""
    if not authorized_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
