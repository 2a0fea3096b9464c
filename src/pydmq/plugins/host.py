"""PluginHost: the typed facade over pluggy and the only caller of ``pm.hook.*``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pluggy

from pydmq.plugins import hookspecs
from pydmq.plugins.markers import PROJECT_NAME

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.assignment.api import GroupAssignorSpec
    from pydmq.assignment.placement import ReplicaPlacerSpec
    from pydmq.replication.strategy import ReplicationStrategySpec
    from pydmq.security.authorizer import AuthorizerSpec
    from pydmq.security.sasl.oauthbearer import OAuthBearerValidatorSpec
    from pydmq.storage.api import StorageEngineSpec

__all__ = ["DuplicateRegistrationError", "PluginHost"]

ENTRY_POINT_GROUP = PROJECT_NAME


class DuplicateRegistrationError(ValueError):
    """Two plugins registered the same name (engine, assignor) or key (API handler)."""


class PluginHost:
    """Builds the plugin manager explicitly (never at import) and exposes typed hook calls.

    Owned by the broker; used at start-up only. Built-ins register through the same hooks as
    third-party plugins loaded from the ``pydmq`` entry-point group.
    """

    def __init__(self, plugins: Iterable[object] = (), *, load_entry_points: bool = True) -> None:
        from pydmq.plugins.builtin import BUILTIN_PLUGINS

        self._pm = pluggy.PluginManager(PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        for plugin in BUILTIN_PLUGINS:
            self._pm.register(plugin)
        for plugin in plugins:
            self._pm.register(plugin)
        if load_entry_points:
            self._pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        self._pm.check_pending()

    def storage_engines(self) -> dict[str, StorageEngineSpec]:
        engines: dict[str, StorageEngineSpec] = {}
        for specs in self._pm.hook.pydmq_register_storage_engines():
            for spec in specs:
                if spec.name in engines:
                    raise DuplicateRegistrationError(
                        f"storage engine {spec.name!r} registered twice"
                    )
                engines[spec.name] = spec
        return engines

    def api_handlers(self) -> dict[int, ApiHandlerSpec]:
        handlers: dict[int, ApiHandlerSpec] = {}
        for specs in self._pm.hook.pydmq_register_api_handlers():
            for spec in specs:
                if spec.api_key in handlers:
                    raise DuplicateRegistrationError(f"API key {spec.api_key} registered twice")
                handlers[spec.api_key] = spec
        return handlers

    def group_assignors(self) -> dict[str, GroupAssignorSpec]:
        """Server-side consumer group assignors by name, in registration order."""
        assignors: dict[str, GroupAssignorSpec] = {}
        for specs in reversed(self._pm.hook.pydmq_register_group_assignors()):
            for spec in specs:
                if spec.name in assignors:
                    raise DuplicateRegistrationError(
                        f"group assignor {spec.name!r} registered twice"
                    )
                assignors[spec.name] = spec
        return assignors

    def replica_placers(self) -> dict[str, ReplicaPlacerSpec]:
        """Replica placers by name, in registration order (built-ins first)."""
        placers: dict[str, ReplicaPlacerSpec] = {}
        for specs in reversed(self._pm.hook.pydmq_register_replica_placers()):
            for spec in specs:
                if spec.name in placers:
                    raise DuplicateRegistrationError(
                        f"replica placer {spec.name!r} registered twice"
                    )
                placers[spec.name] = spec
        return placers

    def replication_strategies(self) -> dict[str, ReplicationStrategySpec]:
        """Replication strategies by name, in registration order (built-ins first)."""
        strategies: dict[str, ReplicationStrategySpec] = {}
        for specs in reversed(self._pm.hook.pydmq_register_replication_strategies()):
            for spec in specs:
                if spec.name in strategies:
                    raise DuplicateRegistrationError(
                        f"replication strategy {spec.name!r} registered twice"
                    )
                strategies[spec.name] = spec
        return strategies

    def authorizers(self) -> dict[str, AuthorizerSpec]:
        """Authorizers by name, in registration order (built-ins first)."""
        authorizers: dict[str, AuthorizerSpec] = {}
        for specs in reversed(self._pm.hook.pydmq_register_authorizers()):
            for spec in specs:
                if spec.name in authorizers:
                    raise DuplicateRegistrationError(f"authorizer {spec.name!r} registered twice")
                authorizers[spec.name] = spec
        return authorizers

    def oauthbearer_validators(self) -> dict[str, OAuthBearerValidatorSpec]:
        """OAUTHBEARER token validators by name, in registration order (built-ins first)."""
        validators: dict[str, OAuthBearerValidatorSpec] = {}
        for specs in reversed(self._pm.hook.pydmq_register_oauthbearer_validators()):
            for spec in specs:
                if spec.name in validators:
                    raise DuplicateRegistrationError(
                        f"OAUTHBEARER validator {spec.name!r} registered twice"
                    )
                validators[spec.name] = spec
        return validators

    def configure(self, config: Mapping[str, str]) -> None:
        self._pm.hook.pydmq_configure(config=config)

    def broker_startup(self, broker: object) -> None:
        self._pm.hook.pydmq_broker_startup(broker=broker)

    def broker_shutdown(self, broker: object) -> None:
        self._pm.hook.pydmq_broker_shutdown(broker=broker)

    def on_topic_created(self, topic: str, topic_id: str, partitions: int) -> None:
        self._pm.hook.pydmq_on_topic_created(topic=topic, topic_id=topic_id, partitions=partitions)

    def on_topic_deleted(self, topic: str, topic_id: str) -> None:
        self._pm.hook.pydmq_on_topic_deleted(topic=topic, topic_id=topic_id)
