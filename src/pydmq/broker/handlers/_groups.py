"""Helpers shared by the group handlers: the coordinator of a request's broker, and the
authorization of a request's group (Kafka's GROUP resource)."""

from __future__ import annotations

from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized
from pydmq.groups.coordinator import GroupCoordinator
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode

__all__ = ["GROUP_DENIED", "coordinator", "group_denied"]

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def coordinator(ctx: BrokerContext) -> GroupCoordinator:
    group_coordinator: GroupCoordinator = ctx.broker.group_coordinator
    return group_coordinator


def group_denied(ctx: BrokerContext, group_id: str, operation: AclOperation) -> bool:
    """Whether the principal may not do ``operation`` on group ``group_id``."""
    return not authorized(ctx, operation, ResourceType.GROUP, group_id)
