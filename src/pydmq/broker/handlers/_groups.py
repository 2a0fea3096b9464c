"""Helpers shared by the group handlers: the coordinator of a request's broker."""

from __future__ import annotations

from pydmq.broker.context import BrokerContext
from pydmq.groups.coordinator import GroupCoordinator

__all__ = ["coordinator"]


def coordinator(ctx: BrokerContext) -> GroupCoordinator:
    group_coordinator: GroupCoordinator = ctx.broker.group_coordinator
    return group_coordinator
