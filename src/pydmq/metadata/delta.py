"""MetadataDelta: replay metadata records on top of an image, then build the next image.

The only way cluster metadata changes (DESIGN.md §1): the controller's operations return
records, the Raft log commits them, and whoever follows the log (the controller runtime, a
broker's metadata listener, a snapshot loader) replays them here. ``apply()`` builds a new
:class:`~pydmq.metadata.image.MetadataImage` that shares every untouched object with the old
one, and ``changed_*()`` tell the caller what to push or act on (LeaderAndIsr, StopReplica,
UpdateMetadata).

Owned by one task at a time; not thread-safe. Sans-IO.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from pydmq.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    QuotaEntity,
    ScramCredentialData,
    TopicImage,
    TopicsImage,
    acl_of_record,
    frozen_mapping,
    quota_entity,
)
from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    RestAnswerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from pydmq.protocol.acl import StandardAcl

__all__ = ["MetadataDelta", "MetadataReplayError"]

PartitionKey = tuple[UUID, int]
PartitionChange = tuple[PartitionRegistration | None, PartitionRegistration | None]
BrokerChange = tuple[BrokerRegistration | None, BrokerRegistration | None]


class MetadataReplayError(ValueError):
    """A record refers to state that does not exist (a topic or partition never created).

    The controller only writes records against its current image, so this means a bug or a
    log that was not produced by a controller.
    """


@dataclass(slots=True)
class _TopicChanges:
    """A topic touched by this delta: created here (``base is None``) or changed."""

    name: str
    topic_id: UUID
    base: TopicImage | None
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)


class MetadataDelta:
    """Accumulates records replayed on top of ``image``; see the module docstring."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict[str, int] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[UUID, _TopicChanges] = {}
        self._deleted: dict[UUID, TopicImage] = {}
        self._configs: dict[tuple[int, str], dict[str, str | None]] = {}
        self._cleared_configs: set[tuple[int, str]] = set()
        self._next_producer_id: int | None = None
        self._acls: dict[UUID, StandardAcl | None] = {}
        # Client quotas changed here: entity -> key -> value, None when removed.
        self._client_quotas: dict[QuotaEntity, dict[str, float | None]] = {}
        self._scram: dict[tuple[str, int], ScramCredentialData | None] = {}
        # REST answers added here, and the creation time of the newest (what has expired).
        self._rest_answers: dict[str, RestAnswerRecord] = {}
        self._rest_answers_at_ms: int | None = None

    # -- replay -------------------------------------------------------------------------

    def replay(self, rec: MetadataRecord) -> None:
        match rec:
            case RegisterBrokerRecord():
                self._brokers[rec.broker_id] = BrokerRegistration.from_record(rec)
            case UnregisterBrokerRecord():
                if self._broker_at_epoch(rec.broker_id, rec.broker_epoch) is not None:
                    self._brokers[rec.broker_id] = None
            case FenceBrokerRecord():
                self._change_broker(rec.id, rec.epoch, fenced=True)
            case UnfenceBrokerRecord():
                self._change_broker(rec.id, rec.epoch, fenced=False)
            case BrokerRegistrationChangeRecord():
                self._change_broker(
                    rec.broker_id, rec.broker_epoch, rec.fenced, rec.in_controlled_shutdown
                )
            case TopicRecord():
                if self._topic(rec.topic_id) is not None:
                    raise MetadataReplayError(f"topic id {rec.topic_id} already exists")
                self._topics[rec.topic_id] = _TopicChanges(rec.name, rec.topic_id, None)
            case PartitionRecord():
                changes = self._touch_topic(rec.topic_id)
                changes.partitions[rec.partition_id] = PartitionRegistration.from_record(rec)
            case PartitionChangeRecord():
                changes = self._touch_topic(rec.topic_id)
                current = self._partition(changes, rec.partition_id)
                changes.partitions[rec.partition_id] = current.merge(rec)
            case RemoveTopicRecord():
                self._remove_topic(rec.topic_id)
            case ConfigRecord():
                key = (rec.resource_type, rec.resource_name)
                self._configs.setdefault(key, {})[rec.name] = rec.value
            case FeatureLevelRecord():
                self._features[rec.name] = rec.feature_level
            case ClientQuotaRecord():
                entity = quota_entity((e.entity_type, e.entity_name) for e in rec.entity)
                quotas = self._client_quotas.setdefault(entity, {})
                quotas[rec.key] = None if rec.remove else rec.value
            case ProducerIdsRecord():
                self._next_producer_id = rec.next_producer_id
            case RestAnswerRecord():
                self._rest_answers[rec.key] = rec
                self._rest_answers_at_ms = max(self._rest_answers_at_ms or 0, rec.created_at_ms)
            case AccessControlEntryRecord():
                self._acls[rec.id] = acl_of_record(rec)
            case RemoveAccessControlEntryRecord():
                if self._acl(rec.id) is None:
                    raise MetadataReplayError(f"unknown ACL id {rec.id}")
                self._acls[rec.id] = None
            case UserScramCredentialRecord():
                self._scram[(rec.name, rec.mechanism)] = ScramCredentialData(
                    rec.salt, rec.stored_key, rec.server_key, rec.iterations
                )
            case RemoveUserScramCredentialRecord():
                self._scram[(rec.name, rec.mechanism)] = None
            case NoOpRecord():
                pass

    def replay_partitions(
        self, topic_id: UUID, partitions: Mapping[int, PartitionRegistration]
    ) -> None:
        """Replay PartitionRecords of one topic already made into their registrations (the
        same as :meth:`replay` of each record, in order;
        :class:`~pydmq.metadata.image_codec.RecordReplayer` shares one registration between
        partitions whose records are equal past their ids)."""
        self._touch_topic(topic_id).partitions.update(partitions)

    def _acl(self, acl_id: UUID) -> StandardAcl | None:
        if acl_id in self._acls:
            return self._acls[acl_id]
        return self.image.acls.get(acl_id)

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def _broker_at_epoch(self, broker_id: int, epoch: int) -> BrokerRegistration | None:
        # A record naming an older epoch refers to a registration that was replaced since;
        # it must not touch the new one.
        broker = self._broker(broker_id)
        return broker if broker is not None and broker.epoch == epoch else None

    def _change_broker(
        self,
        broker_id: int,
        epoch: int,
        fenced: bool | None = None,
        in_controlled_shutdown: bool | None = None,
    ) -> None:
        broker = self._broker_at_epoch(broker_id, epoch)
        if broker is None:
            return
        self._brokers[broker_id] = dataclasses.replace(
            broker,
            fenced=broker.fenced if fenced is None else fenced,
            in_controlled_shutdown=(
                broker.in_controlled_shutdown
                if in_controlled_shutdown is None
                else in_controlled_shutdown
            ),
        )

    def _topic(self, topic_id: UUID) -> TopicImage | _TopicChanges | None:
        if topic_id in self._topics:
            return self._topics[topic_id]
        if topic_id in self._deleted:
            return None
        return self.image.topics.by_id.get(topic_id)

    def _touch_topic(self, topic_id: UUID) -> _TopicChanges:
        changes = self._topics.get(topic_id)
        if changes is not None:
            return changes
        base = None if topic_id in self._deleted else self.image.topics.by_id.get(topic_id)
        if base is None:
            raise MetadataReplayError(f"unknown topic id {topic_id}")
        changes = self._topics[topic_id] = _TopicChanges(base.name, topic_id, base)
        return changes

    def _partition(self, changes: _TopicChanges, partition_id: int) -> PartitionRegistration:
        current = changes.partitions.get(partition_id)
        if current is None and changes.base is not None:
            current = changes.base.partitions.get(partition_id)
        if current is None:
            raise MetadataReplayError(f"unknown partition {changes.name}-{partition_id}")
        return current

    def _remove_topic(self, topic_id: UUID) -> None:
        topic = self._topic(topic_id)
        if topic is None:
            raise MetadataReplayError(f"unknown topic id {topic_id}")
        changes = self._topics.pop(topic_id, None)
        base = changes.base if changes is not None else topic
        if base is not None:
            assert isinstance(base, TopicImage)
            self._deleted[topic_id] = base
        key = (RESOURCE_TOPIC, topic.name)
        self._cleared_configs.add(key)
        self._configs[key] = {}

    # -- what changed ---------------------------------------------------------------------

    def changed_partitions(self) -> dict[PartitionKey, PartitionChange]:
        """(old, new) per changed partition; partitions of deleted topics map to (old, None)."""
        out: dict[PartitionKey, PartitionChange] = {}
        for topic_id, topic in self._deleted.items():
            for pid, gone in topic.partitions.items():
                out[(topic_id, pid)] = (gone, None)
        for topic_id, changes in self._topics.items():
            for pid, new in changes.partitions.items():
                old = changes.base.partitions.get(pid) if changes.base is not None else None
                if old != new:
                    out[(topic_id, pid)] = (old, new)
        return out

    def created_topics(self) -> dict[UUID, str]:
        """Topics created by this delta (and not deleted again), id -> name."""
        return {t: c.name for t, c in self._topics.items() if c.base is None}

    def deleted_topics(self) -> dict[UUID, TopicImage]:
        """Topics of the base image deleted by this delta, as they were."""
        return dict(self._deleted)

    def changed_brokers(self) -> dict[int, BrokerChange]:
        out: dict[int, BrokerChange] = {}
        for broker_id, new in self._brokers.items():
            old = self.image.brokers.get(broker_id)
            if old != new:
                out[broker_id] = (old, new)
        return out

    def changed_config_resources(self) -> set[tuple[int, str]]:
        return set(self._configs)

    def acls_changed(self) -> bool:
        """Whether an ACL was created or deleted (the authorizers must be rebuilt)."""
        return bool(self._acls)

    def changed_client_quotas(self) -> set[QuotaEntity]:
        """The client quota entities ClientQuotaRecords changed (empty: none)."""
        return set(self._client_quotas)

    def scram_credentials_changed(self) -> bool:
        return bool(self._scram)

    # -- the next image -------------------------------------------------------------------

    def apply(self, offset: int, epoch: int) -> MetadataImage:
        """The image after every replayed record; ``offset``/``epoch`` of the last one."""
        image = self.image
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            features=self._apply_features(),
            brokers=self._apply_brokers(),
            topics=self._apply_topics(),
            configs=self._apply_configs(),
            next_producer_id=(
                image.next_producer_id if self._next_producer_id is None else self._next_producer_id
            ),
            acls=self._apply_acls(),
            client_quotas=self._apply_client_quotas(),
            scram_credentials=self._apply_scram(),
            rest_answers=self._apply_rest_answers(),
        )

    def _apply_rest_answers(self) -> Mapping[str, RestAnswerRecord]:
        """The image's answers and the new ones, without those expired when the newest was
        created (a time in the log, so every replica drops the same)."""
        now = self._rest_answers_at_ms
        if now is None:
            return self.image.rest_answers
        answers = {**self.image.rest_answers, **self._rest_answers}
        return frozen_mapping({k: a for k, a in answers.items() if a.expires_at_ms > now})

    def _apply_acls(self) -> Mapping[UUID, StandardAcl]:
        if not self._acls:
            return self.image.acls
        acls = dict(self.image.acls)
        for acl_id, acl in self._acls.items():
            if acl is None:
                acls.pop(acl_id, None)
            else:
                acls[acl_id] = acl
        return frozen_mapping(acls)

    def _apply_scram(self) -> Mapping[tuple[str, int], ScramCredentialData]:
        if not self._scram:
            return self.image.scram_credentials
        credentials = dict(self.image.scram_credentials)
        for key, credential in self._scram.items():
            if credential is None:
                credentials.pop(key, None)
            else:
                credentials[key] = credential
        return frozen_mapping(credentials)

    def _apply_features(self) -> Mapping[str, int]:
        if not self._features:
            return self.image.features
        features = dict(self.image.features)
        for name, level in self._features.items():
            if level == 0:
                features.pop(name, None)
            else:
                features[name] = level
        return frozen_mapping(features)

    def _apply_brokers(self) -> Mapping[int, BrokerRegistration]:
        if not self._brokers:
            return self.image.brokers
        brokers = dict(self.image.brokers)
        for broker_id, registration in self._brokers.items():
            if registration is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = registration
        return frozen_mapping(brokers)

    def _apply_topics(self) -> TopicsImage:
        if not self._topics and not self._deleted:
            return self.image.topics
        topics = dict(self.image.topics.by_id)
        for topic_id in self._deleted:
            topics.pop(topic_id, None)
        for topic_id, changes in self._topics.items():
            base = changes.base
            if base is not None and not changes.partitions:
                continue
            partitions = dict(base.partitions) if base is not None else {}
            partitions.update(changes.partitions)
            topics[topic_id] = TopicImage(changes.name, topic_id, frozen_mapping(partitions))
        return TopicsImage.of(topics)

    def _apply_configs(self) -> Mapping[tuple[int, str], Mapping[str, str]]:
        if not self._configs:
            return self.image.configs
        configs = dict(self.image.configs)
        for key, changes in self._configs.items():
            values = {} if key in self._cleared_configs else dict(configs.get(key, {}))
            for name, value in changes.items():
                if value is None:
                    values.pop(name, None)
                else:
                    values[name] = value
            if values:
                configs[key] = frozen_mapping(values)
            else:
                configs.pop(key, None)
        return frozen_mapping(configs)

    def _apply_client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        if not self._client_quotas:
            return self.image.client_quotas
        quotas = dict(self.image.client_quotas)
        for entity, changes in self._client_quotas.items():
            values = dict(quotas.get(entity, {}))
            for key, value in changes.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                quotas[entity] = frozen_mapping(values)
            else:
                quotas.pop(entity, None)
        return frozen_mapping(quotas)
