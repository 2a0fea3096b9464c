"""Helpers shared by the group handlers: the coordinator of a request's broker."""

from __future__ import annotations

from pydmq.broker.handler import RequestContext
from pydmq.groups.coordinator import GroupCoordinator

__all__ = ["coordinator"]


def coordinator(ctx: RequestContext) -> GroupCoordinator:
    group_coordinator: GroupCoordinator = ctx.broker.group_coordinator
    return group_coordinator
