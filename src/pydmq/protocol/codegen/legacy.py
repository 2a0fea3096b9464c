"""Hand-written schemas of the controller-to-broker APIs (keys 4-7) that kio does not ship.

Kafka 4 removed LeaderAndIsr, StopReplica, UpdateMetadata and ControlledShutdown, so kio has no
classes to build them from. pydmq speaks exactly one flexible version of each, the last layout
Kafka defined (LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8, ControlledShutdown v3),
written here from the public protocol documentation as :class:`ApiSpec` objects, the same
model :mod:`pydmq.protocol.codegen.model` builds from kio. Field names are Kafka's in snake
case, spelled as kio spells them (``type_``, ``id_``, ``is_k_raft_controller``).

pydmq extensions (tagged fields, so they cost nothing when absent):

- UpdateMetadata request, tag 1: ``metadata_offset`` (int64, default -1), the offset of the
  controller's metadata image the request reflects. Tag 0 is Kafka's own ``type_``.
- UpdateMetadata topic state, tag 0: ``configs``, the topic's config overrides as
  ``{name, value}`` pairs (value nullable), so brokers learn topic configs.
- UpdateMetadata live broker, tag 0: ``broker_epoch`` (int64, default -1), the broker's
  registration epoch, so a leader can check the ``replica_epoch`` of a follower's Fetch.
- UpdateMetadata request, tag 2: ``broker_configs``, dynamic broker config layers (BROKER
  resources) as ``{resource_name, configs: [{name, value}]}``: the cluster-wide default ("")
  and the receiving broker's own id. A listed layer replaces the broker's copy of it (empty
  ``configs``: nothing set); an unlisted one is unchanged. The FULL variant lists both.
- UpdateMetadata request, tags 3 and 4: ``acls_included`` (bool, default false) and ``acls``,
  the authorizer's ACLs (the AccessControlEntryRecord fields, with their ids). When
  ``acls_included`` the list replaces the broker's ACLs (empty: none); otherwise they are
  unchanged. The FULL variant includes them, an INCREMENTAL one when ACLs changed.
- UpdateMetadata request, tag 5: ``client_quotas``, client quota entities as ``{entity:
  [{entity_type, entity_name (null: the default)}], values: [{key, value}]}``. A listed
  entity replaces the broker's copy of it (empty ``values``: its quotas were removed); an
  unlisted one is unchanged. The FULL variant lists every entity, and the broker drops the
  others.
- UpdateMetadata request, tags 6 and 7: ``scram_credentials``, every user's SCRAM credential
  (name, mechanism, salt, stored key, server key, iterations), and
  ``scram_credentials_included``: when true the list replaces the broker's copy (the FULL
  variant, and an incremental one after a change); when false (absent) the copy is unchanged.
"""

from __future__ import annotations

from typing import Any

from pydmq.protocol.codegen.model import (
    ApiSpec,
    FieldSpec,
    MessageSpec,
    StructSpec,
    implicit_default,
)

__all__ = ["LEGACY_API_KEYS", "build_legacy"]

SOURCE = "hand-written codegen/legacy.py"

_UNSET: Any = object()


class _Api:
    """Collects the structs of one single-version API."""

    def __init__(self, api_key: int, name: str, version: int) -> None:
        self.api_key = api_key
        self.name = name
        self.version = version

    def field(
        self,
        name: str,
        kafka_type: str,
        *,
        array: bool = False,
        nullable: bool = False,
        default: Any = _UNSET,
        tag: int | None = None,
    ) -> FieldSpec:
        """A primitive field (``array=True``: an array of that primitive)."""
        f = FieldSpec(
            name=name,
            kafka_type=kafka_type,
            struct=None,
            is_array=array,
            versions={self.version},
            nullable_versions={self.version} if nullable else set(),
            tag=tag,
        )
        return _with_default(f, default)

    def structs(self, name: str, struct: StructSpec, *, tag: int | None = None) -> FieldSpec:
        """An array of ``struct``."""
        f = FieldSpec(
            name=name,
            kafka_type=None,
            struct=struct.name,
            is_array=True,
            versions={self.version},
            tag=tag,
        )
        return _with_default(f, _UNSET)

    def struct(self, name: str, *fields: FieldSpec) -> StructSpec:
        plain = [f.name for f in fields if f.tag is None]
        tags = [f.tag for f in fields if f.tag is not None]
        assert tags == sorted(tags) and len(set(tags)) == len(tags), name
        assert all(f.tag is None for f in fields[: len(plain)]), f"{name}: tagged fields last"
        return StructSpec(
            name=name,
            versions={self.version},
            fields=list(fields),
            version_orders={self.version: plain},
        )

    def message(self, kind: str, *structs: StructSpec) -> MessageSpec:
        """The last struct is the root; every struct a field refers to must be listed."""
        by_name = {s.name: s for s in structs}
        assert len(by_name) == len(structs), self.name
        for s in structs:
            for f in s.fields:
                assert f.struct is None or f.struct in by_name, (s.name, f.struct)
        return MessageSpec(kind=kind, root=structs[-1].name, structs=by_name)

    def spec(self, request: MessageSpec, response: MessageSpec) -> ApiSpec:
        shared = set(request.structs) & set(response.structs)
        assert not shared, f"{self.name}: request and response share struct names {shared}"
        return ApiSpec(
            api_key=self.api_key,
            name=self.name,
            min_version=self.version,
            max_version=self.version,
            flexible_versions={self.version},
            request=request,
            response=response,
            source=SOURCE,
        )


def _with_default(f: FieldSpec, default: Any) -> FieldSpec:
    if default is _UNSET:
        f.default = implicit_default(f)
    else:
        f.default = default
        f.has_explicit_default = True
    return f


def leader_and_isr() -> ApiSpec:
    """LeaderAndIsr v7: the controller tells a broker which partitions it leads or follows."""
    a = _Api(4, "leader_and_isr", 7)
    partition_state = a.struct(
        "LeaderAndIsrPartitionState",
        a.field("partition_index", "int32"),
        a.field("controller_epoch", "int32"),
        a.field("leader", "int32"),
        a.field("leader_epoch", "int32"),
        a.field("isr", "int32", array=True),
        a.field("partition_epoch", "int32"),
        a.field("replicas", "int32", array=True),
        a.field("adding_replicas", "int32", array=True),
        a.field("removing_replicas", "int32", array=True),
        a.field("is_new", "bool", default=False),
        a.field("leader_recovery_state", "int8", default=0),
    )
    topic_state = a.struct(
        "LeaderAndIsrTopicState",
        a.field("topic_name", "string"),
        a.field("topic_id", "uuid"),
        a.structs("partition_states", partition_state),
    )
    live_leader = a.struct(
        "LeaderAndIsrLiveLeader",
        a.field("broker_id", "int32"),
        a.field("host_name", "string"),
        a.field("port", "int32"),
    )
    request = a.struct(
        "LeaderAndIsrRequest",
        a.field("controller_id", "int32"),
        a.field("is_k_raft_controller", "bool", default=False),
        a.field("controller_epoch", "int32"),
        a.field("broker_epoch", "int64", default=-1),
        a.field("type_", "int8"),
        a.structs("topic_states", topic_state),
        a.structs("live_leaders", live_leader),
    )
    partition_error = a.struct(
        "LeaderAndIsrPartitionError",
        a.field("partition_index", "int32"),
        a.field("error_code", "error_code"),
    )
    topic_error = a.struct(
        "LeaderAndIsrTopicError",
        a.field("topic_id", "uuid"),
        a.structs("partition_errors", partition_error),
    )
    response = a.struct(
        "LeaderAndIsrResponse",
        a.field("error_code", "error_code"),
        a.structs("topics", topic_error),
    )
    return a.spec(
        a.message("request", partition_state, topic_state, live_leader, request),
        a.message("response", partition_error, topic_error, response),
    )


def stop_replica() -> ApiSpec:
    """StopReplica v4: stop (and maybe delete) replicas a broker no longer hosts."""
    a = _Api(5, "stop_replica", 4)
    partition_state = a.struct(
        "StopReplicaPartitionState",
        a.field("partition_index", "int32"),
        a.field("leader_epoch", "int32", default=-1),
        a.field("delete_partition", "bool"),
    )
    topic_state = a.struct(
        "StopReplicaTopicState",
        a.field("topic_name", "string"),
        a.structs("partition_states", partition_state),
    )
    request = a.struct(
        "StopReplicaRequest",
        a.field("controller_id", "int32"),
        a.field("is_k_raft_controller", "bool", default=False),
        a.field("controller_epoch", "int32"),
        a.field("broker_epoch", "int64", default=-1),
        a.structs("topic_states", topic_state),
    )
    partition_error = a.struct(
        "StopReplicaPartitionError",
        a.field("topic_name", "string"),
        a.field("partition_index", "int32"),
        a.field("error_code", "error_code"),
    )
    response = a.struct(
        "StopReplicaResponse",
        a.field("error_code", "error_code"),
        a.structs("partition_errors", partition_error),
    )
    return a.spec(
        a.message("request", partition_state, topic_state, request),
        a.message("response", partition_error, response),
    )


def update_metadata() -> ApiSpec:
    """UpdateMetadata v8 (+ pydmq tagged fields): the cluster view a broker serves clients."""
    a = _Api(6, "update_metadata", 8)
    partition_state = a.struct(
        "UpdateMetadataPartitionState",
        a.field("partition_index", "int32"),
        a.field("controller_epoch", "int32"),
        a.field("leader", "int32"),
        a.field("leader_epoch", "int32"),
        a.field("isr", "int32", array=True),
        a.field("zk_version", "int32"),
        a.field("replicas", "int32", array=True),
        a.field("offline_replicas", "int32", array=True),
    )
    topic_config = a.struct(
        "UpdateMetadataTopicConfig",
        a.field("name", "string"),
        a.field("value", "string", nullable=True),
    )
    topic_state = a.struct(
        "UpdateMetadataTopicState",
        a.field("topic_name", "string"),
        a.field("topic_id", "uuid"),
        a.structs("partition_states", partition_state),
        a.structs("configs", topic_config, tag=0),  # pydmq extension
    )
    endpoint = a.struct(
        "UpdateMetadataEndpoint",
        a.field("port", "int32"),
        a.field("host", "string"),
        a.field("listener", "string"),
        a.field("security_protocol", "int16"),
    )
    broker = a.struct(
        "UpdateMetadataBroker",
        a.field("id_", "int32"),
        a.structs("endpoints", endpoint),
        a.field("rack", "string", nullable=True),
        a.field("broker_epoch", "int64", default=-1, tag=0),  # pydmq extension
    )
    broker_config = a.struct(
        "UpdateMetadataBrokerConfig",
        a.field("name", "string"),
        a.field("value", "string"),
    )
    broker_configs = a.struct(
        "UpdateMetadataBrokerConfigs",
        a.field("resource_name", "string"),
        a.structs("configs", broker_config),
    )
    acl = a.struct(
        "UpdateMetadataAcl",
        a.field("id_", "uuid"),
        a.field("resource_type", "int8"),
        a.field("resource_name", "string"),
        a.field("pattern_type", "int8"),
        a.field("principal", "string"),
        a.field("host", "string"),
        a.field("operation", "int8"),
        a.field("permission_type", "int8"),
    )
    quota_entity = a.struct(
        "UpdateMetadataQuotaEntity",
        a.field("entity_type", "string"),
        a.field("entity_name", "string", nullable=True),
    )
    quota_value = a.struct(
        "UpdateMetadataQuotaValue",
        a.field("key", "string"),
        a.field("value", "float64"),
    )
    client_quota = a.struct(
        "UpdateMetadataClientQuota",
        a.structs("entity", quota_entity),
        a.structs("values", quota_value),
    )
    scram_credential = a.struct(
        "UpdateMetadataScramCredential",
        a.field("name", "string"),
        a.field("mechanism", "int8"),
        a.field("salt", "bytes"),
        a.field("stored_key", "bytes"),
        a.field("server_key", "bytes"),
        a.field("iterations", "int32"),
    )
    request = a.struct(
        "UpdateMetadataRequest",
        a.field("controller_id", "int32"),
        a.field("is_k_raft_controller", "bool", default=False),
        a.field("controller_epoch", "int32"),
        a.field("broker_epoch", "int64", default=-1),
        a.structs("topic_states", topic_state),
        a.structs("live_brokers", broker),
        a.field("type_", "int8", default=0, tag=0),
        a.field("metadata_offset", "int64", default=-1, tag=1),  # pydmq extension
        a.structs("broker_configs", broker_configs, tag=2),  # pydmq extension
        a.field("acls_included", "bool", default=False, tag=3),  # pydmq extension
        a.structs("acls", acl, tag=4),  # pydmq extension
        a.structs("client_quotas", client_quota, tag=5),  # pydmq extension
        a.structs("scram_credentials", scram_credential, tag=6),  # pydmq extension
        a.field("scram_credentials_included", "bool", default=False, tag=7),  # pydmq extension
        a.structs("group_configs", broker_configs, tag=8),  # pydmq extension
    )
    response = a.struct(
        "UpdateMetadataResponse",
        a.field("error_code", "error_code"),
    )
    return a.spec(
        a.message(
            "request",
            partition_state,
            topic_config,
            topic_state,
            endpoint,
            broker,
            broker_config,
            broker_configs,
            acl,
            quota_entity,
            quota_value,
            client_quota,
            scram_credential,
            request,
        ),
        a.message("response", response),
    )


def controlled_shutdown() -> ApiSpec:
    """ControlledShutdown v3: a stopping broker asks the controller to move its leaderships."""
    a = _Api(7, "controlled_shutdown", 3)
    request = a.struct(
        "ControlledShutdownRequest",
        a.field("broker_id", "int32"),
        a.field("broker_epoch", "int64", default=-1),
    )
    remaining = a.struct(
        "RemainingPartition",
        a.field("topic_name", "string"),
        a.field("partition_index", "int32"),
    )
    response = a.struct(
        "ControlledShutdownResponse",
        a.field("error_code", "error_code"),
        a.structs("remaining_partitions", remaining),
    )
    return a.spec(a.message("request", request), a.message("response", remaining, response))


def build_legacy() -> list[ApiSpec]:
    """The four hand-written APIs, by key."""
    return [leader_and_isr(), stop_replica(), update_metadata(), controlled_shutdown()]


LEGACY_API_KEYS = frozenset({4, 5, 6, 7})
