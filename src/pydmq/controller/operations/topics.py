"""Topic operations: CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Validation and error codes follow Kafka's controller; replicas come from the replica placer
unless the request assigns them, and the first ISR leader from the topic's strategy. Admission
(:mod:`pydmq.config.partition_limits`, POLICY_VIOLATION): at most 10,000 new partitions per
request (checked before any placement), and no broker may end up hosting more partition
replicas than ``max_broker_partitions``, counting those of earlier topics of the request.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pydmq.assignment.placement import InvalidReplicationFactorError
from pydmq.config.definitions import ConfigError
from pydmq.config.partition_limits import broker_limit_problem, request_limit_problem
from pydmq.config.topic import validate_topic_configs
from pydmq.controller.operations.common import (
    DEFAULT_STRATEGY,
    STRATEGY_CONFIG,
    ControllerResult,
    OperationContext,
    electable_brokers,
    strategy_for,
)
from pydmq.metadata.image import MetadataImage, TopicImage
from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.topic_names import topic_name_problem
from pydmq.replication.strategy import ReplicationStrategy

__all__ = [
    "ENGINE_CONFIG",
    "CreatableTopic",
    "CreatableTopicResult",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "DeleteTopicResult",
    "TopicOperationError",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "validate_topic_config_values",
]


class TopicOperationError(Exception):
    """A refused topic (or partition) request: Kafka's error code and message."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """One topic of a CreateTopics request (-1 = broker default)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatableTopicResult:
    name: str
    error_code: int
    error_message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    """One topic of a CreatePartitions request: the new total ``count``."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error_code: int
    error_message: str | None = None


ENGINE_CONFIG = "pydmq.engine"


def validate_topic_config_values(
    ctx: OperationContext, configs: Mapping[str, str | None]
) -> dict[str, str]:
    """Explicit topic configs, validated as Kafka does (INVALID_CONFIG); the replication
    strategy and the storage engine must name registered ones."""
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        raise TopicOperationError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    strategy = configs.get(STRATEGY_CONFIG)
    if strategy is not None and strategy not in ctx.strategies:
        raise TopicOperationError(
            ErrorCode.INVALID_CONFIG, f"unknown replication strategy {strategy!r}"
        )
    engine = configs.get(ENGINE_CONFIG)
    if engine is not None and engine not in ctx.engines:
        raise TopicOperationError(ErrorCode.INVALID_CONFIG, f"unknown storage engine {engine!r}")
    return {k: v for k, v in configs.items() if v is not None}


def _check_assignment(
    image: MetadataImage, assignments: Mapping[int, Sequence[int]], first: int
) -> None:
    """Kafka's manual assignment rules: same size, consecutive ids, distinct registered
    brokers, and at least one usable broker per partition."""
    usable = electable_brokers(image)

    def refuse(message: str) -> TopicOperationError:
        return TopicOperationError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    if len({len(r) for r in assignments.values()}) > 1:
        raise refuse("All partitions should have the same number of replicas")
    if sorted(assignments) != list(range(first, first + len(assignments))):
        raise refuse("Partitions should be a consecutive 0-based integer sequence")
    for pid, replicas in assignments.items():
        if not replicas or len(set(replicas)) != len(replicas):
            raise refuse(f"Duplicate or empty replica assignment for partition {pid}")
        for r in replicas:
            if r not in image.brokers:
                raise refuse(
                    f"The manual partition assignment includes broker {r}, but no broker with "
                    "that id is registered."
                )
        if usable.isdisjoint(replicas):
            raise refuse(
                f"All brokers specified in the manual partition assignment for partition {pid} "
                "are fenced or in controlled shutdown."
            )


def _place(
    image: MetadataImage, ctx: OperationContext, partition_ids: range, replication_factor: int
) -> list[list[int]]:
    usable = [b for b in image.live_brokers() if not b.in_controlled_shutdown]
    try:
        return ctx.placer.place(partition_ids, replication_factor, usable)
    except InvalidReplicationFactorError as exc:
        raise TopicOperationError(ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)) from None


def _hosted_by_broker(image: MetadataImage) -> Counter[int]:
    """Partition replicas each broker hosts (or is being given by a reassignment)."""
    hosted: Counter[int] = Counter()
    for topic in image.topics.by_id.values():
        for p in topic.partitions.values():
            hosted.update(p.replicas)
    return hosted


def _check_request_limit(adding: int, earlier: int) -> None:
    problem = request_limit_problem(adding, earlier)
    if problem:
        raise TopicOperationError(ErrorCode.POLICY_VIOLATION, problem)


def _check_broker_limits(
    ctx: OperationContext, hosted: Counter[int], layout: Iterable[Sequence[int]]
) -> Counter[int]:
    """The replicas ``layout`` adds per broker; POLICY_VIOLATION if a broker would exceed
    ``max_broker_partitions`` with them."""
    adding: Counter[int] = Counter()
    for replicas in layout:
        adding.update(replicas)
    for broker_id in sorted(adding):
        problem = broker_limit_problem(
            broker_id, hosted[broker_id], adding[broker_id], ctx.max_broker_partitions
        )
        if problem:
            raise TopicOperationError(ErrorCode.POLICY_VIOLATION, problem)
    return adding


def _new_partition(
    image: MetadataImage,
    strategy: ReplicationStrategy,
    topic_id: uuid.UUID,
    partition_id: int,
    replicas: Sequence[int],
) -> PartitionRecord:
    usable = electable_brokers(image)
    isr = tuple(r for r in replicas if r in usable)
    leader = strategy.elect_leader(replicas, isr, usable, False)
    return PartitionRecord(partition_id, topic_id, tuple(replicas), isr, (), (), leader, 0, 0, 0)


def _resolve(
    image: MetadataImage,
    ctx: OperationContext,
    t: CreatableTopic,
    taken: Mapping[str, str],
    earlier: int,
) -> tuple[dict[int, list[int]], dict[str, str]]:
    """Validate one topic (``earlier``: partitions of the request's topics before it) and
    place its replicas; (partition -> replicas, explicit configs)."""
    problem = topic_name_problem(t.name)
    if problem:
        raise TopicOperationError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if t.name in image.topics.by_name:
        raise TopicOperationError(
            ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
        )
    collides = taken.get(t.name.replace(".", "_"))
    if collides is not None:
        raise TopicOperationError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{t.name}' collides with existing topic: {collides}",
        )
    configs = validate_topic_config_values(ctx, t.configs)
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise TopicOperationError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        _check_request_limit(len(t.assignments), earlier)
        _check_assignment(image, t.assignments, 0)
        return {p: list(r) for p, r in sorted(t.assignments.items())}, configs
    partitions = ctx.num_partitions if t.num_partitions == -1 else t.num_partitions
    rf = ctx.default_replication_factor if t.replication_factor == -1 else t.replication_factor
    if partitions <= 0:
        raise TopicOperationError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if rf <= 0:
        raise TopicOperationError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    _check_request_limit(partitions, earlier)
    return dict(enumerate(_place(image, ctx, range(partitions), rf))), configs


def create_topics(
    image: MetadataImage,
    ctx: OperationContext,
    topics: Sequence[CreatableTopic],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[CreatableTopicResult]]:
    """TopicRecord, a PartitionRecord per partition and a ConfigRecord per explicit config,
    for each valid topic; per-topic errors otherwise. ``validate_only`` returns no records."""
    counts = Counter(t.name for t in topics)
    taken = {name.replace(".", "_"): name for name in image.topics.by_name}
    records: list[MetadataRecord] = []
    results: list[CreatableTopicResult] = []
    hosted: Counter[int] | None = None  # counted once, and only if a topic gets that far
    planned = 0
    for t in topics:
        if counts[t.name] > 1:
            results.append(
                CreatableTopicResult(t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            )
            continue
        try:
            assignment, configs = _resolve(image, ctx, t, taken, planned)
            if hosted is None:
                hosted = _hosted_by_broker(image)
            adding = _check_broker_limits(ctx, hosted, assignment.values())
        except TopicOperationError as exc:
            results.append(CreatableTopicResult(t.name, exc.error_code, exc.message))
            continue
        hosted.update(adding)
        planned += len(assignment)
        taken[t.name.replace(".", "_")] = t.name
        topic_id = ctx.new_topic_id()
        results.append(
            CreatableTopicResult(
                t.name,
                ErrorCode.NONE,
                None,
                topic_id,
                len(assignment),
                len(next(iter(assignment.values()))),
                configs,
            )
        )
        if validate_only:
            continue
        records.append(TopicRecord(t.name, topic_id))
        records.extend(
            ConfigRecord(RESOURCE_TOPIC, t.name, name, value) for name, value in configs.items()
        )
        strategy = ctx.strategies[configs.get(STRATEGY_CONFIG, DEFAULT_STRATEGY)]
        records.extend(
            _new_partition(image, strategy, topic_id, pid, replicas)
            for pid, replicas in assignment.items()
        )
    return ControllerResult(records, results)


def delete_topics(
    image: MetadataImage, ctx: OperationContext, topics: Sequence[str | uuid.UUID]
) -> ControllerResult[list[DeleteTopicResult]]:
    """A RemoveTopicRecord per existing topic, named by name or by id.

    As Kafka's controller: with ``delete.topic.enable=false`` every topic gets
    TOPIC_DELETION_DISABLED, known or not; unknown names get UNKNOWN_TOPIC_OR_PARTITION and
    unknown ids UNKNOWN_TOPIC_ID, with those errors' default messages."""
    records: list[MetadataRecord] = []
    results: list[DeleteTopicResult] = []
    removed: set[uuid.UUID] = set()
    for ref in topics:
        name: str | None = None
        topic_id: uuid.UUID | None = None
        topic: TopicImage | None
        if isinstance(ref, uuid.UUID):
            topic_id = ref
            topic = image.topics.by_id.get(ref)
            missing = ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
        else:
            name = ref
            topic = image.topics.by_name.get(ref)
            missing = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        if not ctx.delete_topic_enable:
            results.append(
                DeleteTopicResult(
                    name if topic is None else topic.name,
                    topic_id if topic is None else topic.topic_id,
                    ErrorCode.TOPIC_DELETION_DISABLED,
                    "Topic deletion is disabled.",
                )
            )
            continue
        if topic is None:
            results.append(DeleteTopicResult(name, topic_id, *missing))
            continue
        results.append(DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.NONE))
        if topic.topic_id not in removed:
            removed.add(topic.topic_id)
            records.append(RemoveTopicRecord(topic.topic_id))
    return ControllerResult(records, results)


def _grow(
    image: MetadataImage,
    ctx: OperationContext,
    req: CreatePartitionsTopic,
    earlier: int,
    hosted: Counter[int],
) -> list[PartitionRecord]:
    """The PartitionRecords growing one topic (``earlier``: partitions the request's topics
    before it add; ``hosted``: replicas per broker, theirs included)."""
    topic = image.topics.by_name.get(req.name)
    if topic is None:
        raise TopicOperationError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        )
    current = len(topic.partitions)
    if req.count < current:
        raise TopicOperationError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested "
            f"{req.count}.",
        )
    if req.count == current:
        raise TopicOperationError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
        )
    _check_request_limit(req.count - current, earlier)
    first = topic.partitions[min(topic.partitions)]
    rf = len(first.replicas) - len(first.removing_replicas)
    added = range(current, req.count)
    if req.assignments is not None:
        if len(req.assignments) != len(added):
            raise TopicOperationError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {len(added)} additional partition(s), but only "
                f"{len(req.assignments)} assignment(s) were specified.",
            )
        assignments = dict(zip(added, req.assignments, strict=True))
        _check_assignment(image, assignments, current)
        if any(len(r) != rf for r in req.assignments):
            raise TopicOperationError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                "replicas.",
            )
        layout = [list(r) for r in req.assignments]
    else:
        layout = _place(image, ctx, added, rf)
    _check_broker_limits(ctx, hosted, layout)
    strategy = strategy_for(image, ctx, topic.name)
    return [
        _new_partition(image, strategy, topic.topic_id, pid, replicas)
        for pid, replicas in zip(added, layout, strict=True)
    ]


def create_partitions(
    image: MetadataImage,
    ctx: OperationContext,
    topics: Sequence[CreatePartitionsTopic],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[CreatePartitionsResult]]:
    """PartitionRecords for the partitions that grow each topic to its requested count."""
    counts = Counter(t.name for t in topics)
    records: list[MetadataRecord] = []
    results: list[CreatePartitionsResult] = []
    hosted = _hosted_by_broker(image)
    planned = 0
    for req in topics:
        if counts[req.name] > 1:
            results.append(
                CreatePartitionsResult(req.name, ErrorCode.INVALID_REQUEST, "Duplicate topic.")
            )
            continue
        try:
            new = _grow(image, ctx, req, planned, hosted)
        except TopicOperationError as exc:
            results.append(CreatePartitionsResult(req.name, exc.error_code, exc.message))
            continue
        planned += len(new)
        for rec in new:
            hosted.update(rec.replicas)
        results.append(CreatePartitionsResult(req.name, ErrorCode.NONE))
        if not validate_only:
            records.extend(new)
    return ControllerResult(records, results)
