"""MetadataImage: the immutable state of the cluster after replaying the metadata log.

An image is never mutated. :class:`~pydmq.metadata.delta.MetadataDelta` builds the next one
and shares every unchanged sub-object (broker registrations, topics, config maps) with the
previous image, so a new image costs in proportion to what changed. Anyone may keep a
reference to an image and read it from any task without locks.

Sans-IO: no asyncio, sockets or files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, TypeVar
from uuid import UUID

from pydmq.metadata.records import (
    NO_LEADER,
    RESOURCE_BROKER,
    RESOURCE_GROUP,
    RESOURCE_TOPIC,
    AccessControlEntryRecord,
    ClientQuotaRecord,
    ConfigRecord,
    Endpoint,
    EntityData,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RestAnswerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)

__all__ = [
    "BrokerRegistration",
    "Endpoint",
    "MetadataImage",
    "PartitionRegistration",
    "QuotaEntity",
    "ScramCredentialData",
    "TopicImage",
    "TopicsImage",
    "acl_of_record",
    "acl_record",
    "frozen_mapping",
    "quota_entity",
]

K = TypeVar("K")
V = TypeVar("V")


QuotaEntity = tuple[tuple[str, str | None], ...]
"""A client quota entity: its (entity type, entity name) pairs sorted by type; a name of None
is the type's default entity (Kafka's ClientQuotaEntity)."""


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The :data:`QuotaEntity` of ``pairs`` (in any order)."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def frozen_mapping(items: Mapping[K, V] | None = None) -> Mapping[K, V]:
    """A read-only view over a private copy of ``items``."""
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker as the controller knows it (one RegisterBrokerRecord, then flags).

    ``epoch`` is the broker epoch handed out at registration; requests from an older
    incarnation carry an older epoch and are refused with STALE_BROKER_EPOCH.
    """

    id: int
    incarnation_id: UUID
    epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    def endpoint(self, listener_name: str) -> Endpoint | None:
        for e in self.endpoints:
            if e.name == listener_name:
                return e
        return None

    @classmethod
    def from_record(cls, rec: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            rec.broker_id,
            rec.incarnation_id,
            rec.broker_epoch,
            rec.endpoints,
            rec.rack,
            rec.fenced,
            rec.in_controlled_shutdown,
        )

    def to_record(self) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            self.id,
            self.incarnation_id,
            self.epoch,
            self.endpoints,
            self.rack,
            self.fenced,
            self.in_controlled_shutdown,
        )


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """The controller's view of one partition: assignment, ISR, leader and epochs.

    ``leader_epoch`` changes when the leader does (fencing zombie leaders); ``partition_epoch``
    on every change (AlterPartition compare-and-set).
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0
    leader_epoch: int = 0
    partition_epoch: int = 0

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @classmethod
    def from_record(cls, rec: PartitionRecord) -> PartitionRegistration:
        return cls(
            rec.replicas,
            rec.isr,
            rec.removing_replicas,
            rec.adding_replicas,
            rec.leader,
            rec.leader_recovery_state,
            rec.leader_epoch,
            rec.partition_epoch,
        )

    def to_record(self, topic_id: UUID, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader=self.leader,
            leader_recovery_state=self.leader_recovery_state,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after ``change``: partition epoch + 1; leader epoch + 1 when the
        leader field names a different leader (setting the same leader is not a change)."""
        leader = self.leader if change.leader is None else change.leader
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            removing_replicas=(
                self.removing_replicas
                if change.removing_replicas is None
                else change.removing_replicas
            ),
            adding_replicas=(
                self.adding_replicas if change.adding_replicas is None else change.adding_replicas
            ),
            leader=leader,
            leader_recovery_state=(
                self.leader_recovery_state
                if change.leader_recovery_state is None
                else change.leader_recovery_state
            ),
            leader_epoch=self.leader_epoch + (1 if leader != self.leader else 0),
            partition_epoch=self.partition_epoch + 1,
        )


@dataclass(frozen=True, slots=True)
class ScramCredentialData:
    """A user's SCRAM credential of one mechanism (UserScramCredentialRecord): what the
    server keeps of the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_record(self, user: str, mechanism: int) -> UserScramCredentialRecord:
        return UserScramCredentialRecord(
            name=user,
            mechanism=mechanism,
            salt=self.salt,
            stored_key=self.stored_key,
            server_key=self.server_key,
            iterations=self.iterations,
        )


@dataclass(frozen=True, slots=True)
class TopicImage:
    """One topic: its name, id and partitions by partition id."""

    name: str
    topic_id: UUID
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=frozen_mapping)


@dataclass(frozen=True, slots=True)
class TopicsImage:
    """All topics, indexed both by id and by name (the two always hold the same objects)."""

    by_id: Mapping[UUID, TopicImage] = field(default_factory=frozen_mapping)
    by_name: Mapping[str, TopicImage] = field(default_factory=frozen_mapping)

    @classmethod
    def of(cls, topics: Mapping[UUID, TopicImage]) -> TopicsImage:
        by_id = frozen_mapping(topics)
        return cls(by_id, frozen_mapping({t.name: t for t in by_id.values()}))

    def __len__(self) -> int:
        return len(self.by_id)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The cluster metadata as of the record at ``offset`` (Raft ``epoch``) in the log.

    ``configs`` maps ``(resource_type, resource_name)`` to the explicitly set configs
    (:data:`~pydmq.metadata.records.RESOURCE_TOPIC`, ``RESOURCE_BROKER``, ``RESOURCE_GROUP``).
    ``next_producer_id`` is the first producer id not yet handed out. ``acls`` are the
    authorizer's ACLs by id (AccessControlEntryRecord, RemoveAccessControlEntryRecord).
    ``client_quotas``
    maps each client quota entity (:data:`QuotaEntity`) to its quota values by key.
    ``scram_credentials`` maps ``(user name, mechanism type id)`` to the user's SCRAM credential.
    ``rest_answers`` maps an Idempotency-Key to the REST admin API's answer (pydmq's own
    record; replaying one drops those expired at its creation time).
    """

    EMPTY: ClassVar[MetadataImage]

    offset: int = -1
    epoch: int = -1
    features: Mapping[str, int] = field(default_factory=frozen_mapping)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=frozen_mapping)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=frozen_mapping)
    next_producer_id: int = 0
    acls: Mapping[UUID, StandardAcl] = field(default_factory=frozen_mapping)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=frozen_mapping)
    scram_credentials: Mapping[tuple[str, int], ScramCredentialData] = field(
        default_factory=frozen_mapping
    )
    rest_answers: Mapping[str, RestAnswerRecord] = field(default_factory=frozen_mapping)

    # -- queries ------------------------------------------------------------------------

    def partition(self, topic_id: UUID, partition_id: int) -> PartitionRegistration | None:
        topic = self.topics.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered and unfenced brokers, by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def topic_config(self, name: str) -> dict[str, str]:
        """The explicitly set configs of topic ``name`` (no defaults)."""
        return dict(self.configs.get((RESOURCE_TOPIC, name), {}))

    def broker_config(self, name: str) -> dict[str, str]:
        """The dynamic configs of BROKER resource ``name``: a broker id, or "" for the
        cluster-wide default."""
        return dict(self.configs.get((RESOURCE_BROKER, name), {}))

    def group_config(self, group_id: str) -> dict[str, str]:
        """The explicitly set configs of GROUP resource ``group_id`` (no defaults)."""
        return dict(self.configs.get((RESOURCE_GROUP, group_id), {}))

    def partitions_led_by(self, broker_id: int) -> list[tuple[UUID, int]]:
        return [
            (topic.topic_id, pid)
            for topic in self.topics.by_id.values()
            for pid, p in topic.partitions.items()
            if p.leader == broker_id
        ]

    def partitions_with_replica(self, broker_id: int) -> list[tuple[UUID, int]]:
        return [
            (topic.topic_id, pid)
            for topic in self.topics.by_id.values()
            for pid, p in topic.partitions.items()
            if broker_id in p.replicas
        ]

    # -- snapshots ----------------------------------------------------------------------

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image when replayed on :attr:`EMPTY` (a snapshot)."""
        out: list[MetadataRecord] = [
            FeatureLevelRecord(name, level) for name, level in self.features.items()
        ]
        out.extend(b.to_record() for b in self.brokers.values())
        for topic in self.topics.by_id.values():
            out.append(TopicRecord(topic.name, topic.topic_id))
            out.extend(p.to_record(topic.topic_id, pid) for pid, p in topic.partitions.items())
        for (resource_type, resource_name), values in self.configs.items():
            out.extend(
                ConfigRecord(resource_type, resource_name, name, value)
                for name, value in values.items()
            )
        for entity, quotas in self.client_quotas.items():
            entity_data = tuple(EntityData(kind, name) for kind, name in entity)
            out.extend(
                ClientQuotaRecord(entity_data, key, value, False) for key, value in quotas.items()
            )
        if self.next_producer_id:
            out.append(ProducerIdsRecord(-1, -1, self.next_producer_id))
        out.extend(acl_record(acl_id, acl) for acl_id, acl in self.acls.items())
        out.extend(
            credential.to_record(user, mechanism)
            for (user, mechanism), credential in self.scram_credentials.items()
        )
        out.extend(self.rest_answers.values())
        return out


# -- ACLs ------------------------------------------------------------------------------------


def acl_record(acl_id: UUID, acl: StandardAcl) -> AccessControlEntryRecord:
    """The record that creates ``acl`` under ``acl_id``."""
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(acl.resource_type),
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),
        permission_type=int(acl.permission_type),
    )


def acl_of_record(rec: AccessControlEntryRecord) -> StandardAcl:
    """The ACL a record creates (its codes were checked by the record's decoder)."""
    return StandardAcl(
        ResourceType(rec.resource_type),
        rec.resource_name,
        PatternType(rec.pattern_type),
        rec.principal,
        rec.host,
        AclOperation(rec.operation),
        AclPermissionType(rec.permission_type),
    )


MetadataImage.EMPTY = MetadataImage()
