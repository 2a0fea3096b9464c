"""The built-in plugins: registered through the same hooks a third party uses."""

from __future__ import annotations

from types import ModuleType

from pydmq.broker.handler import ApiHandlerSpec
from pydmq.plugins.markers import hookimpl

__all__ = ["BUILTIN_PLUGINS", "HANDLER_MODULES"]

HANDLER_MODULES: tuple[str, ...] = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "init_producer_id",
    "offset_for_leader_epoch",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "delete_records",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "describe_cluster",
    "describe_topic_partitions",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    "consumer_group_heartbeat",
    "consumer_group_describe",
)


class BuiltinApiHandlers:
    """Registers one handler per module of :mod:`pydmq.broker.handlers`."""

    @hookimpl
    def pydmq_register_api_handlers(self) -> list[ApiHandlerSpec]:
        import importlib

        specs: list[ApiHandlerSpec] = []
        for name in HANDLER_MODULES:
            module = importlib.import_module(f"pydmq.broker.handlers.{name}")
            specs.append(module.HANDLER)
        return specs


def _engine_plugins() -> list[ModuleType]:
    from pydmq.engines import memory
    from pydmq.engines.segment import plugin as segment

    return [segment, memory]


def _assignor_plugins() -> list[ModuleType]:
    from pydmq.assignment import plugin as assignors

    return [assignors]


BUILTIN_PLUGINS: list[object] = [BuiltinApiHandlers(), *_engine_plugins(), *_assignor_plugins()]
