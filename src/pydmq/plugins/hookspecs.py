"""Every ``pydmq_*`` hook. Hooks wire the system at start-up; hot paths never call them.

Verbs are a closed set: ``register_*`` (return frozen spec objects; duplicate names are an
error), ``configure``, ``<subject>_startup`` / ``<subject>_shutdown``, and ``on_<subject>_<event>``
(notify-only observers: fast, never on the per-record path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydmq.plugins.markers import hookspec

if TYPE_CHECKING:
    from pydmq.api.handler import ApiHandlerSpec
    from pydmq.assignment.api import GroupAssignorSpec
    from pydmq.assignment.placement import ReplicaPlacerSpec
    from pydmq.replication.strategy import ReplicationStrategySpec
    from pydmq.security.authorizer import AuthorizerSpec
    from pydmq.security.sasl.oauthbearer import OAuthBearerValidatorSpec
    from pydmq.storage.api import StorageEngineSpec

__all__ = [
    "pydmq_broker_shutdown",
    "pydmq_broker_startup",
    "pydmq_configure",
    "pydmq_on_topic_created",
    "pydmq_on_topic_deleted",
    "pydmq_register_api_handlers",
    "pydmq_register_authorizers",
    "pydmq_register_group_assignors",
    "pydmq_register_oauthbearer_validators",
    "pydmq_register_replica_placers",
    "pydmq_register_replication_strategies",
    "pydmq_register_storage_engines",
]


@hookspec
def pydmq_register_storage_engines() -> list[StorageEngineSpec]:
    """Return the storage engines this plugin provides.

    :return: a list of :class:`~pydmq.storage.api.StorageEngineSpec`; the broker picks one by
        name through the ``log.engine`` broker config (default ``segment``) or the
        ``pydmq.engine`` topic config. Each engine must pass ``pydmq.testing.conformance``.

    Called: once, when the broker's :class:`~pydmq.plugins.host.PluginHost` is built.

    .. versionadded:: 0.1
    """
    raise NotImplementedError


@hookspec
def pydmq_register_api_handlers() -> list[ApiHandlerSpec]:
    """Return request handlers, one :class:`~pydmq.api.handler.ApiHandlerSpec` per API key.

    The ApiVersions response is derived from these registrations: a key is advertised with
    exactly the version range its handler declares. Two plugins registering the same key is an
    error.

    Called: once, at broker start-up.

    .. versionadded:: 0.1
    """
    raise NotImplementedError


@hookspec
def pydmq_register_group_assignors() -> list[GroupAssignorSpec]:
    """Return server-side partition assignors for consumer groups (KIP-848).

    :return: a list of :class:`~pydmq.assignment.api.GroupAssignorSpec`; ``name`` is what a
        client sends as ``server_assignor`` (``group.remote.assignor``), ``assignor`` an object
        with ``assign(spec: AssignmentSpec) -> Mapping[member id, {topic id: partitions}]``.
        It must be pure and deterministic; the coordinator rejects results that assign a
        partition twice, or a partition of a topic the member does not subscribe to. The
        built-ins are ``uniform`` (the default, first in ``group.consumer.assignors``) and
        ``range``. A client naming an unregistered assignor is answered UNSUPPORTED_ASSIGNOR.
        Two plugins registering the same name is an error.

    Called: once, when the broker is built (before any listener opens).

    .. versionadded:: 0.2
    """
    raise NotImplementedError


@hookspec
def pydmq_register_replica_placers() -> list[ReplicaPlacerSpec]:
    """Return replica placers: how the controller spreads the replicas of new partitions.

    :return: a list of :class:`~pydmq.assignment.placement.ReplicaPlacerSpec`; ``factory()``
        builds an object with ``place(partitions, replication_factor, brokers, start)``
        returning one replica list per partition id (first replica = preferred leader), each
        of distinct ids from ``brokers`` (the usable brokers, with ``id`` and ``rack``). It
        must be pure; it raises ``InvalidReplicationFactorError`` when the replication factor
        cannot be met. The built-in is ``striped`` (Kafka's rack-aware round robin). Two
        plugins registering the same name is an error.

    Called: once, when the controller is built (before it serves requests).

    .. versionadded:: 0.2
    """
    raise NotImplementedError


@hookspec
def pydmq_register_replication_strategies() -> list[ReplicationStrategySpec]:
    """Return replication strategies: how a partition commits writes and elects leaders.

    :return: a list of :class:`~pydmq.replication.strategy.ReplicationStrategySpec`;
        ``factory()`` builds a :class:`~pydmq.replication.strategy.ReplicationStrategy` with
        ``min_insync_replicas``, ``high_watermark``, ``may_shrink_isr_to`` and
        ``elect_leader``. A topic picks one by name with the ``pydmq.replication.strategy``
        topic config (default ``isr``). The object is resolved once per partition and called
        directly on the produce path (the high watermark), so it must be pure and cheap. The
        built-ins are ``isr`` (Kafka's rules) and ``quorum`` (majority ISR). Two plugins
        registering the same name is an error.

    Called: once, when the broker and the controller are built (before they serve requests).

    .. versionadded:: 0.2
    """
    raise NotImplementedError


@hookspec
def pydmq_register_authorizers() -> list[AuthorizerSpec]:
    """Return authorizers: what a request's principal may do, decided from the ACLs.

    :return: a list of :class:`~pydmq.security.authorizer.AuthorizerSpec`; ``name`` is what
        the ``authorizer.class.name`` broker property gives (empty, the default: no
        authorizer), ``factory(config)`` builds an
        :class:`~pydmq.security.authorizer.Authorizer` from the broker configuration once at
        start-up. The broker hands it the metadata image's ACLs (``update_acls``) at start and
        whenever they change, and its handlers call ``authorize`` /
        ``authorize_by_resource_type`` directly on the event loop, so both must be cheap. The
        built-in is ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (Kafka's
        rules). A name nobody registered stops the broker at start-up; two plugins
        registering the same name is an error.

    Called: once, when the broker is built (before any listener opens).

    .. versionadded:: 0.3
    """
    raise NotImplementedError


@hookspec
def pydmq_register_oauthbearer_validators() -> list[OAuthBearerValidatorSpec]:
    """Return OAUTHBEARER token validators: how SASL/OAUTHBEARER logins check bearer tokens.

    :return: a list of :class:`~pydmq.security.sasl.oauthbearer.OAuthBearerValidatorSpec`;
        ``factory(options)`` gets the JAAS options of the listener's OAUTHBEARER entry and
        builds an object whose ``validate(token)`` returns an
        :class:`~pydmq.security.sasl.oauthbearer.OAuthBearerToken` (principal name, expiry in
        epoch ms, scopes) or raises ``TokenValidationError``. It runs on the event loop, so
        it must not block (keep JWKS keys in memory, refreshed by a task of the plugin's
        own). The broker config ``pydmq.sasl.oauthbearer.validator`` names the one used
        (default ``unsecured``: Kafka's unsecured JWS validator). Two plugins registering the
        same name is an error.

    Called: once, when the node builds its SASL listeners (before they serve).

    .. versionadded:: 0.3
    """
    raise NotImplementedError


@hookspec
def pydmq_configure(config: Mapping[str, str]) -> None:
    """Inspect the effective broker configuration (Kafka property names) before start-up.

    :param config: every broker property with its effective value, as strings.

    Called: once, after the configuration is read and before any listener opens.

    .. versionadded:: 0.1
    """


@hookspec
def pydmq_broker_startup(broker: object) -> None:
    """The broker has opened its logs and listeners and is about to serve requests.

    :param broker: the :class:`~pydmq.broker.server.Broker`, the node's broker role.

    Called: once per broker start, on the event loop; never on a controller-only node.

    .. versionadded:: 0.1
    """


@hookspec
def pydmq_broker_shutdown(broker: object) -> None:
    """The broker stopped serving and is about to close its logs.

    :param broker: the :class:`~pydmq.broker.server.Broker`, the node's broker role.

    Called: once per orderly stop, on the event loop; never on a controller-only node.

    .. versionadded:: 0.1
    """


@hookspec
def pydmq_on_topic_created(topic: str, topic_id: str, partitions: int) -> None:
    """Notify-only: a topic was created (by CreateTopics or auto-creation).

    :param topic: the topic name.
    :param topic_id: the topic id as a UUID string.
    :param partitions: the partition count.

    Called: after the topic's logs exist, on the event loop; in cluster mode on every node with
    the broker role, when it applies the controller's metadata that adds the topic. Never for
    the topics a node starts with (docs/HOOKS.md).

    .. versionadded:: 0.1
    """


@hookspec
def pydmq_on_topic_deleted(topic: str, topic_id: str) -> None:
    """Notify-only: a topic and its logs were deleted.

    :param topic: the topic name.
    :param topic_id: the topic id as a UUID string.

    Called: after the topic's logs are deleted, on the event loop; in cluster mode on every node
    with the broker role, when it applies the controller's metadata that removes the topic.

    .. versionadded:: 0.1
    """
