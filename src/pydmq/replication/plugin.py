"""The built-in replication strategies, registered through the same hook a third party uses."""

from __future__ import annotations

from pydmq.plugins.markers import hookimpl
from pydmq.replication.strategy import ReplicationStrategySpec, builtin_replication_strategies

__all__ = ["pydmq_register_replication_strategies"]


@hookimpl
def pydmq_register_replication_strategies() -> list[ReplicationStrategySpec]:
    return builtin_replication_strategies()
