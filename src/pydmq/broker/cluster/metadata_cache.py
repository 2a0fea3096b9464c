"""MetadataCache: the cluster view a broker serves clients, fed only by UpdateMetadata.

In cluster mode the controller owns the metadata; a broker keeps the last state pushed to it:
alive brokers and their endpoints, the active controller, and every topic with its id,
partitions (leader, leader epoch, replicas, ISR, offline replicas) and config overrides. Topics
live in an in-memory :class:`~pydmq.broker.topics.TopicRegistry` (nothing is written: after a
restart the controller pushes a FULL update), so the handlers that read the registry in
single-node mode read it unchanged in cluster mode.

Update rules (as Kafka's ZooKeeper-era MetadataCache):

- requests from an older controller epoch are refused (STALE_CONTROLLER_EPOCH, by the handler);
- a ``metadata_offset`` (pydmq tagged field) older than the one applied is ignored;
- ``type_`` 2 (FULL, Kafka's value) replaces the topic set; otherwise listed partitions are upserted, and a
  partition whose leader is -2 (Kafka's LeaderDuringDelete) is removed with its topic once
  the topic has no partitions left;
- a topic state carries the topic's complete config overrides (they replace ours);
- ``live_brokers`` always replaces the alive set;
- ``acls_included``/``acls`` (pydmq tagged fields) carry every ACL when they changed (and in
  the FULL request): the broker's authorizer is given them.
- ``scram_credentials`` (pydmq tagged field), when ``scram_credentials_included``, replaces
  the users' SCRAM credentials the broker's SCRAM logins check.
- ``broker_configs`` (pydmq tagged field) carries dynamic broker config layers: the cluster
  default ("") and this broker's own (its id); a listed layer replaces ours, a FULL update
  also empties the layers it does not list (layers of other brokers are ignored);
- ``group_configs`` (pydmq tagged field) carries GROUP config resources, each complete (empty:
  removed); a FULL request replaces them all.
- ``client_quotas`` (pydmq tagged field) carries client quota entities with their complete
  values: a listed entity replaces ours (no values: removed), a FULL update also drops the
  entities it does not list.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydmq.broker.services import FinalizedFeatures
from pydmq.broker.topics import PartitionInfo, TopicInfo, TopicRegistry
from pydmq.metadata.image import QuotaEntity, ScramCredentialData, quota_entity
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.protocol.control_requests import FULL, INCREMENTAL, LEADER_DURING_DELETE
from pydmq.protocol.messages.update_metadata import (
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from pydmq.protocol.topic_names import INTERNAL_TOPICS
from pydmq.security.acl_filter import code_of
from pydmq.storage.api import TopicPartition

__all__ = [
    "UPDATE_FULL",
    "CachedBroker",
    "MetadataCache",
    "MetadataUpdate",
]

UPDATE_INCREMENTAL = INCREMENTAL
UPDATE_FULL = FULL


@dataclass(frozen=True, slots=True)
class CachedBroker:
    """An alive broker: its endpoints by listener name, rack and registration epoch."""

    node_id: int
    endpoints: dict[str, tuple[str, int]]
    rack: str | None
    epoch: int = -1

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        return self.endpoints.get(listener)


@dataclass(slots=True)
class MetadataUpdate:
    """What one applied UpdateMetadata changed, for the caller to act on: net changes (a topic
    added and removed by the same update is in neither list; one re-created under its name is
    in both, the old topic deleted, the new one created)."""

    applied: bool
    config_changed: set[str] = field(default_factory=set)
    broker_configs_changed: bool = False
    acls_changed: bool = False
    client_quotas_changed: bool = False
    deleted_topics: list[TopicInfo] = field(default_factory=list)
    created_topics: list[TopicInfo] = field(default_factory=list)


class MetadataCache:
    """Owned by the broker's event loop."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.topics = TopicRegistry()
        self.controller_id = -1
        self.controller_epoch = -1
        self.metadata_offset = -1
        # UpdateMetadata requests applied: changes with everything the handlers read here.
        self.updates = 0
        self.brokers: dict[int, CachedBroker] = {}
        self.offline_replicas: dict[TopicPartition, list[int]] = {}
        # Dynamic broker configs: the cluster default ("") and this broker's own layer.
        self.broker_configs: dict[str, dict[str, str]] = {"": {}, str(node_id): {}}
        # The authorizer's ACLs by id, as the controller's last UpdateMetadata carrying them.
        self.acls: dict[uuid.UUID, StandardAcl] = {}
        # The finalized feature levels, as the active controller's ApiVersions reported them
        # (the broker lifecycle asks after each registration).
        self.finalized_features = FinalizedFeatures(-1, {})
        # Client quotas, as a metadata image holds them: entity -> key -> value.
        self.client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}
        # Users' SCRAM credentials by (user, mechanism type id).
        self.scram_credentials: dict[tuple[str, int], ScramCredentialData] = {}
        # The configs set on GROUP resources (KIP-848/932), by group id.
        self.group_configs: dict[str, dict[str, str]] = {}

    # -- reads -----------------------------------------------------------------------
    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def broker_epoch(self, broker_id: int) -> int:
        """The registration epoch of an alive broker; -1 when it is not alive (or unknown)."""
        broker = self.brokers.get(broker_id)
        return -1 if broker is None else broker.epoch

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        broker = self.brokers.get(broker_id)
        return None if broker is None else broker.endpoint(listener)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        topic = self.topics.get(tp.topic)
        if topic is None:
            return None
        for p in topic.partitions:
            if p.index == tp.partition:
                return p
        return None

    def offline(self, tp: TopicPartition) -> list[int]:
        return self.offline_replicas.get(tp, [])

    # -- updates ---------------------------------------------------------------------
    def update(self, request: UpdateMetadataRequest) -> MetadataUpdate:
        """Apply one UpdateMetadata (its controller epoch already checked by the caller)."""
        offset = request.metadata_offset
        if 0 <= offset < self.metadata_offset:
            return MetadataUpdate(applied=False)
        self.updates += 1
        self.controller_id = request.controller_id
        self.controller_epoch = max(self.controller_epoch, request.controller_epoch)
        if offset >= 0:
            self.metadata_offset = offset
        self.brokers = {
            b.id_: CachedBroker(
                b.id_, {e.listener: (e.host, e.port) for e in b.endpoints}, b.rack, b.broker_epoch
            )
            for b in request.live_brokers
        }
        result = MetadataUpdate(applied=True)
        listed: set[str] = set()
        for state in request.topic_states:
            listed.add(state.topic_name)
            self._apply_topic(state.topic_name, state.topic_id, state, result)
        if request.type_ == UPDATE_FULL:
            for topic in list(self.topics):
                if topic.name not in listed:
                    self._remove_topic(topic, result)
        self._apply_broker_configs(request, result)
        if request.acls_included:
            self._apply_acls(request, result)
        self._apply_client_quotas(request, result)
        self._apply_group_configs(request)
        if request.scram_credentials_included:
            self.scram_credentials = {
                (c.name, c.mechanism): ScramCredentialData(
                    c.salt, c.stored_key, c.server_key, c.iterations
                )
                for c in request.scram_credentials
            }
        return result

    def _apply_group_configs(self, request: UpdateMetadataRequest) -> None:
        """A FULL request replaces every group's configs; an incremental one those of the
        groups it names (each complete; empty: the group's configs are gone)."""
        if request.type_ == UPDATE_FULL:
            self.group_configs = {}
        for group in request.group_configs:
            configs = {c.name: c.value for c in group.configs}
            if configs:
                self.group_configs[group.resource_name] = configs
            else:
                self.group_configs.pop(group.resource_name, None)

    def _apply_acls(self, request: UpdateMetadataRequest, result: MetadataUpdate) -> None:
        acls = {
            a.id_: StandardAcl(
                code_of(ResourceType, a.resource_type),
                a.resource_name,
                code_of(PatternType, a.pattern_type),
                a.principal,
                a.host,
                code_of(AclOperation, a.operation),
                code_of(AclPermissionType, a.permission_type),
            )
            for a in request.acls
        }
        if acls != self.acls:
            self.acls = acls
            result.acls_changed = True

    def _apply_client_quotas(self, request: UpdateMetadataRequest, result: MetadataUpdate) -> None:
        if not request.client_quotas and request.type_ != UPDATE_FULL:
            return
        quotas = {} if request.type_ == UPDATE_FULL else dict(self.client_quotas)
        for listed in request.client_quotas:
            entity = quota_entity((e.entity_type, e.entity_name) for e in listed.entity)
            values = {v.key: v.value for v in listed.values}
            if values:
                quotas[entity] = values
            else:
                quotas.pop(entity, None)
        if quotas != self.client_quotas:
            self.client_quotas = quotas
            result.client_quotas_changed = True

    def _apply_broker_configs(self, request: UpdateMetadataRequest, result: MetadataUpdate) -> None:
        layers = {
            layer.resource_name: {c.name: c.value for c in layer.configs}
            for layer in request.broker_configs
            if layer.resource_name in self.broker_configs
        }
        if request.type_ == UPDATE_FULL:
            layers = {name: layers.get(name, {}) for name in self.broker_configs}
        for name, configs in layers.items():
            if self.broker_configs[name] != configs:
                self.broker_configs[name] = configs
                result.broker_configs_changed = True

    def _apply_topic(
        self,
        name: str,
        topic_id: uuid.UUID,
        state: UpdateMetadataTopicState,
        result: MetadataUpdate,
    ) -> None:
        topic = self.topics.get(name)
        if topic is not None and topic.topic_id != topic_id:
            # Deleted and re-created under the same name while we were not told.
            self._remove_topic(topic, result)
            topic = None
        configs = {c.name: c.value for c in state.configs if c.value is not None}
        deleting = bool(state.partition_states) and all(
            ps.leader == LEADER_DURING_DELETE for ps in state.partition_states
        )
        if topic is None and deleting:
            return
        if topic is None:
            topic = TopicInfo(
                name=name,
                topic_id=topic_id,
                partitions=[],
                configs=configs,
                internal=name in INTERNAL_TOPICS,
            )
            self.topics.add(topic)
            result.created_topics.append(topic)
        elif not deleting and configs != topic.configs:
            topic.configs = configs
            result.config_changed.add(name)
        by_index = {p.index: p for p in topic.partitions}
        for ps in state.partition_states:
            tp = TopicPartition(name, ps.partition_index)
            if ps.leader == LEADER_DURING_DELETE:
                by_index.pop(ps.partition_index, None)
                self.offline_replicas.pop(tp, None)
                continue
            by_index[ps.partition_index] = PartitionInfo(
                ps.partition_index, ps.leader, ps.leader_epoch, list(ps.replicas), list(ps.isr)
            )
            if ps.offline_replicas:
                self.offline_replicas[tp] = list(ps.offline_replicas)
            else:
                self.offline_replicas.pop(tp, None)
        topic.partitions = [by_index[i] for i in sorted(by_index)]
        if not topic.partitions and state.partition_states:
            self._remove_topic(topic, result)

    def _remove_topic(self, topic: TopicInfo, result: MetadataUpdate) -> None:
        self.topics.remove(topic.name)
        for p in topic.partitions:
            self.offline_replicas.pop(TopicPartition(topic.name, p.index), None)
        created = len(result.created_topics)
        result.created_topics = [t for t in result.created_topics if t is not topic]
        if len(result.created_topics) == created:
            result.deleted_topics.append(topic)

    def topic_names(self) -> Iterable[str]:
        return [t.name for t in self.topics]
