"""What the active controller tells each broker after the metadata image changes.

Pure functions from (old image, new image, delta) to the LeaderAndIsr (key 4), StopReplica
(key 5) and UpdateMetadata (key 6) requests of each registered broker, plus the FULL variants
sent to one broker after it (re)registers, reconnects, or the controller fails over. Keeping
this free of I/O lets the channel manager stay a dumb ordered queue and lets tests check the
propagation rules without sockets.

Rules (docs/CLUSTER.md, "Controller -> broker messages"):

- LeaderAndIsr goes to every replica of a partition whose registration changed (any change
  bumps the partition epoch, so any change is relevant to the replicas); ``live_leaders``
  lists the endpoints (on the inter-broker listener) of the leaders it names.
- StopReplica with ``delete_partition=True`` goes to a broker dropped from a partition's
  replicas and to every replica of a deleted topic.
- UpdateMetadata goes to every registered broker (fenced ones too: they must catch up to be
  unfenced) whenever a partition, topic, broker or topic config changed. It carries the changed
  partitions, every live (unfenced) broker with all its endpoints, rack and registration epoch
  (pydmq's tagged ``broker_epoch``: leaders check followers' fetches against it), and for each topic
  it names the topic's *complete* config overrides (pydmq's tagged ``configs``: a topic state
  replaces the broker's overrides of that topic). Deleted topics appear with leader
  ``LEADER_DURING_DELETE`` (-2), as Kafka's ZooKeeper-era controller marked them.
  ``metadata_offset`` is the new image's offset.
- ACLs (pydmq's tagged ``acls_included``/``acls``): every ACL of the image in the FULL
  UpdateMetadata, and in an INCREMENTAL one to every broker when a delta created or deleted
  ACLs.
- Dynamic broker configs (pydmq's tagged ``broker_configs``): the FULL UpdateMetadata carries
  the cluster-wide default ("") and the receiving broker's own layer, always; an incremental
  one the layers among those two that the delta changed (a broker whose own layer changed,
  or every broker when the default changed, gets an UpdateMetadata for it). Another
  broker's layer is never sent.
- Group configs (pydmq's tagged ``group_configs``, GROUP config resources, KIP-848/932): the
  FULL UpdateMetadata carries every group's configs; an incremental one, to every broker, the
  groups the delta changed, each complete (empty: removed).
- Client quotas (pydmq's tagged ``client_quotas``): the FULL UpdateMetadata lists every client
  quota entity with its values; an incremental one (sent to every broker when quotas changed)
  the entities the delta changed, each with its complete values (none: removed).
- SCRAM credentials (pydmq's tagged ``scram_credentials``, with ``scram_credentials_included``):
  the FULL UpdateMetadata carries every credential; an incremental one carries them all again,
  to every broker, when the delta changed any (so brokers' SCRAM logins follow
  AlterUserScramCredentials).
- Request order for one broker and one change: LeaderAndIsr, StopReplica, UpdateMetadata, so
  a broker that acknowledged an UpdateMetadata at offset N has applied everything up to N.
- ``type_``: ``FULL`` (2) for the full-state variants, ``INCREMENTAL`` (1) otherwise
  (Kafka's values, in :mod:`pydmq.protocol.control_requests`; 0 means unknown).
  A FULL LeaderAndIsr lists every partition the broker replicates (anything else the broker
  holds is stray); a FULL UpdateMetadata lists every topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from pydmq.protocol.control_requests import FULL, INCREMENTAL, LEADER_DURING_DELETE
from pydmq.protocol.messages.leader_and_isr import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from pydmq.protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from pydmq.protocol.messages.update_metadata import (
    UpdateMetadataAcl,
    UpdateMetadataBroker,
    UpdateMetadataBrokerConfig,
    UpdateMetadataBrokerConfigs,
    UpdateMetadataClientQuota,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataQuotaEntity,
    UpdateMetadataQuotaValue,
    UpdateMetadataRequest,
    UpdateMetadataScramCredential,
    UpdateMetadataTopicConfig,
    UpdateMetadataTopicState,
)

if TYPE_CHECKING:
    from pydmq.metadata.delta import MetadataDelta
    from pydmq.metadata.image import MetadataImage, PartitionRegistration, QuotaEntity

__all__ = [
    "BROKER_RESOURCE",
    "TOPIC_RESOURCE",
    "BrokerPush",
    "delta_pushes",
    "full_push",
]

TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
GROUP_RESOURCE: Final = 32
LEADER_AND_ISR_KEY: Final = 4
STOP_REPLICA_KEY: Final = 5
UPDATE_METADATA_KEY: Final = 6


@dataclass(slots=True)
class BrokerPush:
    """The requests one broker must receive for one image change (None = nothing to send)."""

    broker_id: int
    metadata_offset: int
    leader_and_isr: LeaderAndIsrRequest | None = None
    stop_replica: StopReplicaRequest | None = None
    update_metadata: UpdateMetadataRequest | None = None

    def requests(self) -> list[tuple[int, object]]:
        """``(api_key, request)`` pairs in the order they must be sent."""
        out: list[tuple[int, object]] = []
        if self.leader_and_isr is not None:
            out.append((LEADER_AND_ISR_KEY, self.leader_and_isr))
        if self.stop_replica is not None:
            out.append((STOP_REPLICA_KEY, self.stop_replica))
        if self.update_metadata is not None:
            out.append((UPDATE_METADATA_KEY, self.update_metadata))
        return out

    def __bool__(self) -> bool:
        return not (
            self.leader_and_isr is None
            and self.stop_replica is None
            and self.update_metadata is None
        )


@dataclass(slots=True)
class _TopicPartitions:
    """Per-topic accumulator while building one broker's requests."""

    name: str
    topic_id: uuid.UUID
    leader_states: list[LeaderAndIsrPartitionState] = field(default_factory=list)
    stops: list[StopReplicaPartitionState] = field(default_factory=list)


# -- building blocks ---------------------------------------------------------------------------


def _live_brokers(image: MetadataImage) -> list[UpdateMetadataBroker]:
    """Unfenced brokers with every endpoint, as brokers serve them to clients."""
    out: list[UpdateMetadataBroker] = []
    for broker_id in sorted(image.brokers):
        broker = image.brokers[broker_id]
        if broker.fenced:
            continue
        out.append(
            UpdateMetadataBroker(
                id_=broker_id,
                endpoints=[
                    UpdateMetadataEndpoint(
                        port=ep.port,
                        host=ep.host,
                        listener=ep.name,
                        security_protocol=int(ep.security_protocol),
                    )
                    for ep in broker.endpoints
                ],
                rack=broker.rack,
                broker_epoch=broker.epoch,
            )
        )
    return out


def _offline_replicas(image: MetadataImage, replicas: Iterable[int]) -> list[int]:
    """Replicas on brokers that are unregistered or fenced (Kafka's KRaft metadata cache)."""
    out: list[int] = []
    for replica in replicas:
        broker = image.brokers.get(replica)
        if broker is None or broker.fenced:
            out.append(replica)
    return out


def _leader_state(
    partition_id: int,
    reg: PartitionRegistration,
    controller_epoch: int,
    *,
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        partition_index=partition_id,
        controller_epoch=controller_epoch,
        leader=reg.leader,
        leader_epoch=reg.leader_epoch,
        isr=list(reg.isr),
        partition_epoch=reg.partition_epoch,
        replicas=list(reg.replicas),
        adding_replicas=list(reg.adding_replicas),
        removing_replicas=list(reg.removing_replicas),
        is_new=is_new,
        leader_recovery_state=reg.leader_recovery_state,
    )


def _metadata_state(
    image: MetadataImage,
    partition_id: int,
    reg: PartitionRegistration,
    controller_epoch: int,
    *,
    deleted: bool = False,
) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(
        partition_index=partition_id,
        controller_epoch=controller_epoch,
        leader=LEADER_DURING_DELETE if deleted else reg.leader,
        leader_epoch=reg.leader_epoch,
        isr=list(reg.isr),
        zk_version=reg.partition_epoch,
        replicas=list(reg.replicas),
        offline_replicas=[] if deleted else _offline_replicas(image, reg.replicas),
    )


def _topic_configs(image: MetadataImage, topic_name: str) -> list[UpdateMetadataTopicConfig]:
    overrides = image.configs.get((TOPIC_RESOURCE, topic_name), {})
    return [UpdateMetadataTopicConfig(name=k, value=overrides[k]) for k in sorted(overrides)]


def _broker_config_layers(
    image: MetadataImage, names: Iterable[str]
) -> list[UpdateMetadataBrokerConfigs]:
    """The dynamic broker config layers ``names`` ("" or a broker id), each complete."""
    return _config_resources(image, BROKER_RESOURCE, names)


def _config_resources(
    image: MetadataImage, resource_type: int, names: Iterable[str]
) -> list[UpdateMetadataBrokerConfigs]:
    """The configs of the ``resource_type`` resources ``names``, each complete (none: all
    removed)."""
    out: list[UpdateMetadataBrokerConfigs] = []
    for name in names:
        layer = image.configs.get((resource_type, name), {})
        configs = [UpdateMetadataBrokerConfig(name=k, value=layer[k]) for k in sorted(layer)]
        out.append(UpdateMetadataBrokerConfigs(resource_name=name, configs=configs))
    return out


def _live_leaders(
    image: MetadataImage, leaders: Iterable[int], listener_name: str
) -> list[LeaderAndIsrLiveLeader]:
    out: list[LeaderAndIsrLiveLeader] = []
    for leader in sorted(set(leaders)):
        if leader < 0:
            continue
        broker = image.brokers.get(leader)
        if broker is None:
            continue
        endpoint = broker.endpoint(listener_name)
        if endpoint is None:
            continue
        out.append(
            LeaderAndIsrLiveLeader(broker_id=leader, host_name=endpoint.host, port=endpoint.port)
        )
    return out


def _broker_epoch(image: MetadataImage, broker_id: int) -> int:
    broker = image.brokers.get(broker_id)
    return -1 if broker is None else broker.epoch


def _leader_and_isr(
    image: MetadataImage,
    broker_id: int,
    topics: Iterable[_TopicPartitions],
    *,
    controller_id: int,
    controller_epoch: int,
    listener_name: str,
    type_: int,
) -> LeaderAndIsrRequest:
    topic_states: list[LeaderAndIsrTopicState] = []
    leaders: list[int] = []
    for acc in topics:
        if not acc.leader_states:
            continue
        topic_states.append(
            LeaderAndIsrTopicState(
                topic_name=acc.name, topic_id=acc.topic_id, partition_states=acc.leader_states
            )
        )
        leaders.extend(s.leader for s in acc.leader_states)
    return LeaderAndIsrRequest(
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=controller_epoch,
        broker_epoch=_broker_epoch(image, broker_id),
        type_=type_,
        topic_states=topic_states,
        live_leaders=_live_leaders(image, leaders, listener_name),
    )


def _stop_replica(
    image: MetadataImage,
    broker_id: int,
    topics: Iterable[_TopicPartitions],
    *,
    controller_id: int,
    controller_epoch: int,
) -> StopReplicaRequest:
    return StopReplicaRequest(
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=controller_epoch,
        broker_epoch=_broker_epoch(image, broker_id),
        topic_states=[
            StopReplicaTopicState(topic_name=acc.name, partition_states=acc.stops)
            for acc in topics
            if acc.stops
        ],
    )


def _update_metadata(
    image: MetadataImage,
    broker_id: int,
    topic_states: list[UpdateMetadataTopicState],
    live_brokers: list[UpdateMetadataBroker],
    *,
    controller_id: int,
    controller_epoch: int,
    type_: int,
    broker_configs: list[UpdateMetadataBrokerConfigs],
    with_acls: bool = False,
    client_quotas: list[UpdateMetadataClientQuota],
    scram: bool = False,
    group_configs: list[UpdateMetadataBrokerConfigs] | None = None,
) -> UpdateMetadataRequest:
    """``scram``: include every SCRAM credential of ``image``."""
    return UpdateMetadataRequest(
        acls_included=with_acls,
        acls=_acls(image) if with_acls else [],
        controller_id=controller_id,
        is_k_raft_controller=True,
        controller_epoch=controller_epoch,
        broker_epoch=_broker_epoch(image, broker_id),
        topic_states=topic_states,
        live_brokers=live_brokers,
        type_=type_,
        metadata_offset=image.offset,
        broker_configs=broker_configs,
        client_quotas=client_quotas,
        scram_credentials=_scram_credentials(image) if scram else [],
        scram_credentials_included=scram,
        group_configs=group_configs or [],
    )


def _acls(image: MetadataImage) -> list[UpdateMetadataAcl]:
    """Every ACL of ``image``, with its id."""
    return [
        UpdateMetadataAcl(
            id_=acl_id,
            resource_type=acl.resource_type,
            resource_name=acl.resource_name,
            pattern_type=acl.pattern_type,
            principal=acl.principal,
            host=acl.host,
            operation=acl.operation,
            permission_type=acl.permission_type,
        )
        for acl_id, acl in image.acls.items()
    ]


def _client_quotas(
    image: MetadataImage, entities: Iterable[QuotaEntity]
) -> list[UpdateMetadataClientQuota]:
    """The UpdateMetadata form of ``entities`` with their values in ``image`` (none when
    their quotas were removed), in a stable order."""
    return [
        UpdateMetadataClientQuota(
            entity=[
                UpdateMetadataQuotaEntity(entity_type=kind, entity_name=name)
                for kind, name in entity
            ],
            values=[
                UpdateMetadataQuotaValue(key=key, value=value)
                for key, value in sorted(image.client_quotas.get(entity, {}).items())
            ],
        )
        for entity in sorted(entities, key=repr)
    ]


def _scram_credentials(image: MetadataImage) -> list[UpdateMetadataScramCredential]:
    return [
        UpdateMetadataScramCredential(
            name=user,
            mechanism=mechanism,
            salt=data.salt,
            stored_key=data.stored_key,
            server_key=data.server_key,
            iterations=data.iterations,
        )
        for (user, mechanism), data in sorted(image.scram_credentials.items())
    ]


def _changed_topic_configs(new: MetadataImage, delta: MetadataDelta) -> set[str]:
    """Names of existing topics whose config overrides ``delta`` touched."""
    return {
        name
        for resource_type, name in delta.changed_config_resources()
        if resource_type == TOPIC_RESOURCE and name in new.topics.by_name
    }


# -- public API --------------------------------------------------------------------------------


def delta_pushes(
    old: MetadataImage,
    new: MetadataImage,
    delta: MetadataDelta,
    *,
    controller_id: int,
    controller_epoch: int,
    listener_name: str,
) -> dict[int, BrokerPush]:
    """Incremental requests per registered broker (of ``new``) for the change old -> new.

    Brokers with nothing to receive are absent from the result.
    """
    changed = delta.changed_partitions()
    deleted = delta.deleted_topics()
    changed_brokers = delta.changed_brokers()
    config_topics = _changed_topic_configs(new, delta)
    broker_layers = {
        name
        for resource_type, name in delta.changed_config_resources()
        if resource_type == BROKER_RESOURCE
    }
    changed_groups = sorted(
        name
        for resource_type, name in delta.changed_config_resources()
        if resource_type == GROUP_RESOURCE
    )

    # broker -> topic id -> accumulator
    per_broker: dict[int, dict[uuid.UUID, _TopicPartitions]] = {}
    # topic id -> UpdateMetadata partition states (same for every broker)
    metadata_states: dict[uuid.UUID, list[UpdateMetadataPartitionState]] = {}
    topic_names: dict[uuid.UUID, str] = {}

    def acc(broker_id: int, topic_id: uuid.UUID) -> _TopicPartitions:
        topics = per_broker.setdefault(broker_id, {})
        entry = topics.get(topic_id)
        if entry is None:
            entry = topics[topic_id] = _TopicPartitions(topic_names[topic_id], topic_id)
        return entry

    for (topic_id, partition_id), (before, after) in sorted(
        changed.items(), key=lambda item: (str(item[0][0]), item[0][1])
    ):
        if topic_id in deleted:
            continue  # handled with the deleted topics below
        if after is None:
            topic = old.topics.by_id.get(topic_id)
            if topic is None or before is None:
                continue
            topic_names[topic_id] = topic.name
            for replica in before.replicas:
                acc(replica, topic_id).stops.append(
                    StopReplicaPartitionState(
                        partition_index=partition_id,
                        leader_epoch=before.leader_epoch,
                        delete_partition=True,
                    )
                )
            continue
        topic = new.topics.by_id.get(topic_id)
        if topic is None:
            continue
        topic_names[topic_id] = topic.name
        state = _leader_state(partition_id, after, controller_epoch, is_new=before is None)
        for replica in after.replicas:
            acc(replica, topic_id).leader_states.append(state)
        if before is not None:
            for replica in before.replicas:
                if replica not in after.replicas:
                    acc(replica, topic_id).stops.append(
                        StopReplicaPartitionState(
                            partition_index=partition_id,
                            leader_epoch=after.leader_epoch,
                            delete_partition=True,
                        )
                    )
        metadata_states.setdefault(topic_id, []).append(
            _metadata_state(new, partition_id, after, controller_epoch)
        )

    deleted_states: dict[uuid.UUID, list[UpdateMetadataPartitionState]] = {}
    for topic_id, topic in deleted.items():
        topic_names[topic_id] = topic.name
        states: list[UpdateMetadataPartitionState] = []
        for partition_id in sorted(topic.partitions):
            reg = topic.partitions[partition_id]
            for replica in reg.replicas:
                acc(replica, topic_id).stops.append(
                    StopReplicaPartitionState(
                        partition_index=partition_id,
                        leader_epoch=reg.leader_epoch,
                        delete_partition=True,
                    )
                )
            states.append(_metadata_state(old, partition_id, reg, controller_epoch, deleted=True))
        deleted_states[topic_id] = states

    # UpdateMetadata topic states: changed partitions, deleted topics, changed configs.
    um_topics: list[UpdateMetadataTopicState] = []
    seen: set[uuid.UUID] = set()
    for topic_id, states in metadata_states.items():
        name = topic_names[topic_id]
        seen.add(topic_id)
        um_topics.append(
            UpdateMetadataTopicState(
                topic_name=name,
                topic_id=topic_id,
                partition_states=states,
                configs=_topic_configs(new, name),
            )
        )
    for topic_id, states in deleted_states.items():
        um_topics.append(
            UpdateMetadataTopicState(
                topic_name=topic_names[topic_id], topic_id=topic_id, partition_states=states
            )
        )
    for name in sorted(config_topics):
        topic = new.topics.by_name[name]
        if topic.topic_id in seen:
            continue
        um_topics.append(
            UpdateMetadataTopicState(
                topic_name=name,
                topic_id=topic.topic_id,
                partition_states=[],
                configs=_topic_configs(new, name),
            )
        )
    acls_changed = delta.acls_changed()
    quota_entities = delta.changed_client_quotas()
    client_quotas = _client_quotas(new, quota_entities)
    scram = delta.scram_credentials_changed()
    send_metadata = bool(um_topics or changed_brokers or quota_entities or scram or changed_groups)
    live = _live_brokers(new) if send_metadata or broker_layers or acls_changed else []

    pushes: dict[int, BrokerPush] = {}
    for broker_id in sorted(new.brokers):
        push = BrokerPush(broker_id, new.offset)
        topics = per_broker.get(broker_id, {})
        accs = [topics[t] for t in topics]
        if any(a.leader_states for a in accs):
            push.leader_and_isr = _leader_and_isr(
                new,
                broker_id,
                accs,
                controller_id=controller_id,
                controller_epoch=controller_epoch,
                listener_name=listener_name,
                type_=INCREMENTAL,
            )
        if any(a.stops for a in accs):
            push.stop_replica = _stop_replica(
                new, broker_id, accs, controller_id=controller_id, controller_epoch=controller_epoch
            )
        layers = [name for name in ("", str(broker_id)) if name in broker_layers]
        if send_metadata or layers or acls_changed:
            push.update_metadata = _update_metadata(
                new,
                broker_id,
                um_topics,
                live,
                controller_id=controller_id,
                controller_epoch=controller_epoch,
                type_=INCREMENTAL,
                broker_configs=_broker_config_layers(new, layers),
                with_acls=acls_changed,
                client_quotas=client_quotas,
                scram=scram,
                group_configs=_config_resources(new, GROUP_RESOURCE, changed_groups),
            )
        if push:
            pushes[broker_id] = push
    return pushes


def full_push(
    image: MetadataImage,
    broker_id: int,
    *,
    controller_id: int,
    controller_epoch: int,
    listener_name: str,
) -> BrokerPush:
    """The FULL LeaderAndIsr and UpdateMetadata for one broker from ``image`` alone.

    Sent first after the broker (re)registers, after its connection broke, and by a newly
    active controller, so the broker never depends on incremental requests it may have missed.
    """
    accs: list[_TopicPartitions] = []
    um_topics: list[UpdateMetadataTopicState] = []
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        entry = _TopicPartitions(name, topic.topic_id)
        states: list[UpdateMetadataPartitionState] = []
        for partition_id in sorted(topic.partitions):
            reg = topic.partitions[partition_id]
            if broker_id in reg.replicas:
                entry.leader_states.append(
                    _leader_state(partition_id, reg, controller_epoch, is_new=False)
                )
            states.append(_metadata_state(image, partition_id, reg, controller_epoch))
        if entry.leader_states:
            accs.append(entry)
        um_topics.append(
            UpdateMetadataTopicState(
                topic_name=name,
                topic_id=topic.topic_id,
                partition_states=states,
                configs=_topic_configs(image, name),
            )
        )
    push = BrokerPush(broker_id, image.offset)
    push.leader_and_isr = _leader_and_isr(
        image,
        broker_id,
        accs,
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        listener_name=listener_name,
        type_=FULL,
    )
    push.update_metadata = _update_metadata(
        image,
        broker_id,
        um_topics,
        _live_brokers(image),
        controller_id=controller_id,
        controller_epoch=controller_epoch,
        type_=FULL,
        broker_configs=_broker_config_layers(image, ("", str(broker_id))),
        with_acls=True,
        client_quotas=_client_quotas(image, image.client_quotas),
        scram=True,
        group_configs=_config_resources(
            image, GROUP_RESOURCE, sorted(n for t, n in image.configs if t == GROUP_RESOURCE)
        ),
    )
    return push
