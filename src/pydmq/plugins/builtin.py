"""The built-in plugins: registered through the same hooks a third party uses."""

from __future__ import annotations

from types import ModuleType

from pydmq.api.handler import ApiHandlerSpec
from pydmq.plugins.markers import hookimpl

__all__ = [
    "BUILTIN_PLUGINS",
    "CONTROL_PLANE_HANDLER_MODULES",
    "HANDLER_MODULES",
    "control_plane_handlers",
]

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
    "txn_offset_commit",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "share_group_heartbeat",
    "share_group_describe",
    "share_fetch",
    "share_acknowledge",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "initialize_share_group_state",
    "read_share_group_state",
    "write_share_group_state",
    "delete_share_group_state",
    "read_share_group_state_summary",
    "elect_leaders",
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "describe_log_dirs",
    "alter_replica_log_dirs",
    "write_txn_markers",
    "describe_producers",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "describe_transactions",
    "list_transactions",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_client_quotas",
    "alter_client_quotas",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
)


# The controller-to-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata). A cluster-mode
# broker serves them, with ApiVersions, only on its control-plane listener (KIP-291), never on
# a client listener; a single-node broker neither serves nor advertises them (as Kafka 4,
# whose ApiVersions no longer lists keys 4-7).
CONTROL_PLANE_HANDLER_MODULES: tuple[str, ...] = (
    "api_versions",
    "leader_and_isr",
    "stop_replica",
    "update_metadata",
    "sasl_handshake",
    "sasl_authenticate",
)


def control_plane_handlers() -> list[ApiHandlerSpec]:
    """The handlers of :data:`CONTROL_PLANE_HANDLER_MODULES`: the control-plane listener's."""
    import importlib

    return [
        importlib.import_module(f"pydmq.broker.handlers.{name}").HANDLER
        for name in CONTROL_PLANE_HANDLER_MODULES
    ]


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


def _replication_plugins() -> list[ModuleType]:
    from pydmq.replication import plugin as strategies

    return [strategies]


def _authorizer_plugins() -> list[ModuleType]:
    from pydmq.security import plugin as authorizers

    return [authorizers]


def _sasl_plugins() -> list[ModuleType]:
    from pydmq.security.sasl import plugin as validators

    return [validators]


BUILTIN_PLUGINS: list[object] = [
    BuiltinApiHandlers(),
    *_authorizer_plugins(),
    *_engine_plugins(),
    *_assignor_plugins(),
    *_replication_plugins(),
    *_sasl_plugins(),
]
