"""What every controller operation shares: the result type, the context, elections.

An operation reads a :class:`~pydmq.metadata.image.MetadataImage` and returns a
:class:`ControllerResult`: the records to commit and the response to send once they are
committed. It changes nothing itself (DESIGN.md §1: state changes only by replaying records),
so the runtime can run it, append its records to the Raft log, and answer after the commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from pydmq.assignment.placement import ReplicaPlacer
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pydmq.metadata.records import NO_LEADER, MetadataRecord, PartitionChangeRecord
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.strategy import ReplicationStrategy

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig
    from pydmq.plugins.host import PluginHost

__all__ = [
    "DEFAULT_STRATEGY",
    "LEADER_RECOVERING",
    "STRATEGY_CONFIG",
    "ControllerResult",
    "OperationContext",
    "check_broker",
    "electable_brokers",
    "image_after",
    "move_replicas_away",
    "operation_context",
    "partition_change",
    "partition_change_to",
    "strategy_for",
    "unclean_allowed",
]

R = TypeVar("R")

STRATEGY_CONFIG = "pydmq.replication.strategy"
DEFAULT_STRATEGY = "isr"
UNCLEAN_CONFIG = "unclean.leader.election.enable"
LEADER_RECOVERING = 1
"""leader_recovery_state after an unclean election (Kafka's LeaderRecoveryState.RECOVERING)."""


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[R]):
    """Records to commit, and the response to send after they are committed."""

    records: list[MetadataRecord]
    response: R


@dataclass(frozen=True, slots=True)
class OperationContext:
    """What operations need besides the image: plugins and broker config values.

    Built once by the controller runtime from its config and plugin host.
    """

    strategies: Mapping[str, ReplicationStrategy]
    placer: ReplicaPlacer
    engines: frozenset[str] = frozenset()  # the registered storage engines' names
    default_engine: str = "segment"  # log.engine: a topic's engine when it names none
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    producer_id_block_size: int = 1000
    max_broker_partitions: int = 50_000  # pydmq.max.broker.partitions
    # The controller's own broker properties without dynamic layers (BrokerConfig's
    # static_configs): where a dynamic list property's APPEND/SUBTRACT starts.
    static_broker_configs: Mapping[str, str] = field(default_factory=dict)
    new_topic_id: Callable[[], uuid.UUID] = field(default=uuid.uuid4)


def operation_context(
    config: BrokerConfig, plugins: PluginHost, image: MetadataImage = MetadataImage.EMPTY
) -> OperationContext:
    """The operations' view of configuration and plugins (strategies, replica placer,
    storage engines). A property that can change at run time (``log.engine``,
    ``unclean.leader.election.enable``, ``pydmq.max.broker.partitions``) takes its value from
    ``image``'s dynamic broker configs, this controller's own layer first, then the cluster
    default, as Kafka's controller does; the static configuration otherwise. Built again
    whenever those layers change."""
    layers = (image.broker_config(str(config.node_id)), image.broker_config(""))

    def value(name: str) -> object:
        for layer in layers:
            raw = layer.get(name)
            if raw is not None:
                return config.definitions[name].parse(raw)
        return config.static_value(name)

    strategies = {name: spec.factory() for name, spec in plugins.replication_strategies().items()}
    placers = plugins.replica_placers()
    wanted = config.get_str("pydmq.replica.placer")
    spec = placers.get(wanted)
    if spec is None:
        known = ", ".join(sorted(placers)) or "none"
        raise ValueError(f"pydmq.replica.placer {wanted!r} is not registered (known: {known})")
    max_broker_partitions = value("pydmq.max.broker.partitions")
    assert isinstance(max_broker_partitions, int)
    return OperationContext(
        strategies=strategies,
        placer=spec.factory(),
        engines=frozenset(plugins.storage_engines()),
        default_engine=str(value("log.engine")),
        num_partitions=config.get_int("num.partitions"),
        default_replication_factor=config.get_int("default.replication.factor"),
        unclean_leader_election_enable=bool(value("unclean.leader.election.enable")),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        max_broker_partitions=max_broker_partitions,
        static_broker_configs=config.static_configs(),
    )


def strategy_for(image: MetadataImage, ctx: OperationContext, topic: str) -> ReplicationStrategy:
    """The topic's replication strategy (``pydmq.replication.strategy``, default ``isr``).

    A name that is no longer registered (its plugin was removed) falls back to the default:
    elections must still happen, and ``isr`` is the conservative reading of an ISR.
    """
    name = image.topic_config(topic).get(STRATEGY_CONFIG, DEFAULT_STRATEGY)
    strategy = ctx.strategies.get(name)
    return strategy if strategy is not None else ctx.strategies[DEFAULT_STRATEGY]


def unclean_allowed(image: MetadataImage, ctx: OperationContext, topic: str) -> bool:
    raw = image.topic_config(topic).get(UNCLEAN_CONFIG)
    return ctx.unclean_leader_election_enable if raw is None else raw.strip().lower() == "true"


def electable_brokers(image: MetadataImage, excluding: Collection[int] = ()) -> set[int]:
    """Brokers that may lead or join an ISR: unfenced and not in controlled shutdown."""
    return {
        b.id
        for b in image.brokers.values()
        if not b.fenced and not b.in_controlled_shutdown and b.id not in excluding
    }


def check_broker(image: MetadataImage, broker_id: int, broker_epoch: int) -> ErrorCode:
    """Kafka's broker epoch check for broker-to-controller requests."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        return ErrorCode.BROKER_ID_NOT_REGISTERED
    if broker.epoch != broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    return ErrorCode.NONE


def partition_change(
    topic_id: uuid.UUID,
    partition_id: int,
    old: PartitionRegistration,
    *,
    isr: Sequence[int] | None = None,
    leader: int | None = None,
    replicas: Sequence[int] | None = None,
    removing_replicas: Sequence[int] | None = None,
    adding_replicas: Sequence[int] | None = None,
    leader_recovery_state: int | None = None,
) -> PartitionChangeRecord | None:
    """A PartitionChangeRecord carrying only the fields that differ from ``old``; None when
    nothing differs (so no-op changes never bump epochs)."""

    def diff(new: Sequence[int] | None, current: tuple[int, ...]) -> tuple[int, ...] | None:
        return None if new is None or tuple(new) == current else tuple(new)

    rec = PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=diff(isr, old.isr),
        leader=None if leader is None or leader == old.leader else leader,
        replicas=diff(replicas, old.replicas),
        removing_replicas=diff(removing_replicas, old.removing_replicas),
        adding_replicas=diff(adding_replicas, old.adding_replicas),
        leader_recovery_state=(
            None
            if leader_recovery_state is None or leader_recovery_state == old.leader_recovery_state
            else leader_recovery_state
        ),
    )
    if rec == PartitionChangeRecord(partition_id, topic_id):
        return None
    return rec


def partition_change_to(
    topic_id: uuid.UUID, partition_id: int, old: PartitionRegistration, new: PartitionRegistration
) -> PartitionChangeRecord | None:
    """The PartitionChangeRecord turning ``old`` into ``new`` (replicas, ISR, leader,
    reassignment and leader recovery state; replay bumps the epochs), None when they agree."""
    return partition_change(
        topic_id,
        partition_id,
        old,
        isr=new.isr,
        leader=new.leader,
        replicas=new.replicas,
        removing_replicas=new.removing_replicas,
        adding_replicas=new.adding_replicas,
        leader_recovery_state=new.leader_recovery_state,
    )


def elect(
    strategy: ReplicationStrategy,
    p: PartitionRegistration,
    isr: Sequence[int],
    live: Collection[int],
    unclean: bool,
) -> tuple[int, tuple[int, ...], int]:
    """(leader, isr, leader_recovery_state) after electing through ``strategy``.

    A leader from outside the ISR (unclean) becomes the whole ISR and starts RECOVERING, as in
    Kafka; with nobody electable the leader is ``-1`` and the ISR is left as given so the last
    members can come back.
    """
    leader = strategy.elect_leader(p.replicas, isr, live, unclean)
    if leader != NO_LEADER and leader not in isr:
        return leader, (leader,), LEADER_RECOVERING
    return leader, tuple(isr), p.leader_recovery_state


def move_replicas_away(
    image: MetadataImage,
    ctx: OperationContext,
    removed: Collection[int],
    *,
    shrink_isr: bool = True,
) -> list[PartitionChangeRecord]:
    """Take leadership (and, where the strategy allows, ISR membership) from ``removed``.

    Used when brokers are fenced, unregister, re-register or shut down. Removed brokers leave
    each ISR one at a time (in id order) while ``may_shrink_isr_to`` allows; a partition they
    led gets the leader its strategy elects among the electable brokers, else ``-1``.
    """
    gone = set(removed)
    live = electable_brokers(image, excluding=gone)
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.by_id.values():
        strategy = strategy_for(image, ctx, topic.name)
        unclean = unclean_allowed(image, ctx, topic.name)
        for pid, p in topic.partitions.items():
            if p.leader not in gone and gone.isdisjoint(p.isr):
                continue
            isr = list(p.isr)
            if shrink_isr:
                for broker_id in sorted(gone.intersection(isr)):
                    candidate = [r for r in isr if r != broker_id]
                    if strategy.may_shrink_isr_to(candidate, p.replicas):
                        isr = candidate
            leader, lrs = p.leader, p.leader_recovery_state
            new_isr: Sequence[int] = isr
            if leader in gone or leader == NO_LEADER:
                leader, new_isr, lrs = elect(strategy, p, isr, live, unclean)
            rec = partition_change(
                topic.topic_id, pid, p, isr=new_isr, leader=leader, leader_recovery_state=lrs
            )
            if rec is not None:
                out.append(rec)
    return out


def elect_offline_leaders(
    image: MetadataImage, ctx: OperationContext, broker_ids: Collection[int]
) -> list[PartitionChangeRecord]:
    """Leaders for leaderless partitions that one of ``broker_ids`` (just unfenced) can lead."""
    candidates = set(broker_ids)
    live = electable_brokers(image) | candidates
    out: list[PartitionChangeRecord] = []
    for topic in image.topics.by_id.values():
        strategy = strategy_for(image, ctx, topic.name)
        unclean = unclean_allowed(image, ctx, topic.name)
        for pid, p in topic.partitions.items():
            if p.leader != NO_LEADER or candidates.isdisjoint(p.replicas):
                continue
            leader, isr, lrs = elect(strategy, p, p.isr, live, unclean)
            if leader == NO_LEADER:
                continue
            rec = partition_change(
                topic.topic_id, pid, p, isr=isr, leader=leader, leader_recovery_state=lrs
            )
            if rec is not None:
                out.append(rec)
    return out


def image_after(image: MetadataImage, records: Iterable[MetadataRecord]) -> MetadataImage:
    """``image`` with ``records`` replayed: what the cluster will look like once they commit."""
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)
    return delta.apply(image.offset, image.epoch)


def find_partition(
    image: MetadataImage, topic: str, partition_id: int
) -> tuple[TopicImage, PartitionRegistration] | None:
    t = image.topics.by_name.get(topic)
    if t is None:
        return None
    p = t.partitions.get(partition_id)
    return None if p is None else (t, p)
