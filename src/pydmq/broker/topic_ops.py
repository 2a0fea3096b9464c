"""TopicOperations: create, delete and grow topics with Kafka's validation and error codes.

Used by CreateTopics, DeleteTopics, CreatePartitions and Metadata auto-creation, so all of them
apply the same rules, in the order Kafka's controller does: names, collisions, counts, configs,
then admission (:mod:`pydmq.config.partition_limits`: at most 10,000 new partitions per
request and ``pydmq.max.broker.partitions`` hosted by this node, POLICY_VIOLATION beyond).

Creation is all or nothing (:class:`~pydmq.broker.partition_creation.PartitionCreation`): the
partitions' logs are opened first and the registry is changed last, with one entry of the
local metadata log for the whole request; a failure opening any log (or writing the entry)
removes every partition the request opened and answers KAFKA_STORAGE_ERROR for each of its topics, leaving the registry as it was.
CreateTopics and CreatePartitions run one request at a time (as Kafka's controller does) and
open partitions in chunks between which the event loop serves other connections
(:meth:`TopicOperations.create_topics`, :meth:`TopicOperations.create_partitions`); names being
created meanwhile are taken (TOPIC_ALREADY_EXISTS) and their partitions count as hosted.
Metadata auto-creation and ``__consumer_offsets`` are small and synchronous
(:meth:`TopicOperations.create_topics_now`). A deletion or config change whose entry cannot be
written is refused with KAFKA_STORAGE_ERROR and changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydmq.broker.partition_creation import PartitionCreation
from pydmq.broker.topics import LocalTopicRegistry, PartitionInfo, TopicInfo
from pydmq.config.definitions import ConfigError, ConfigType, parse_value
from pydmq.config.partition_limits import broker_limit_problem, request_limit_problem
from pydmq.config.topic import TopicConfig, check_known, validate_topic_configs
from pydmq.metadata.records import MetadataRecord, PartitionRecord
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.topic_names import topic_name_problem
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.controller.local import LocalController

__all__ = [
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "NewPartitions",
    "NewTopic",
    "TopicOperations",
]

# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType ids)
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


def _storage_error(what: str, exc: KafkaStorageError) -> TopicError:
    return TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {exc.message}")


@dataclass(frozen=True, slots=True)
class NewTopic:
    """One topic of a creation request (-1: the broker default; or manual ``assignments``)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str | None] = field(default_factory=dict)
    assignments: Mapping[int, list[int]] | None = None


@dataclass(frozen=True, slots=True)
class NewPartitions:
    """One topic of a CreatePartitions request: its new total ``count``."""

    name: str
    count: int
    assignments: list[list[int]] | None = None


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


class TopicOperations:
    """Owned by the broker; every mutation is persisted through the LocalTopicRegistry."""

    def __init__(
        self, broker: Broker, registry: LocalTopicRegistry, controller: LocalController
    ) -> None:
        self._broker = broker
        self._registry = registry
        self._controller = controller
        self._serial = asyncio.Lock()  # CreateTopics / CreatePartitions, one at a time
        self._creating: set[str] = set()  # topics whose partitions a request is opening
        self._unopened = 0  # partitions admitted by a request and not opened yet

    def _live_brokers(self) -> list[int]:
        return [self._broker.node_id]

    # -- admission ------------------------------------------------------------------------

    def _hosted(self) -> int:
        """Partitions hosted here, counting those admitted and not opened yet."""
        return len(self._broker.replica_manager.partitions) + self._unopened

    def _admit(self, adding: int, earlier: int) -> None:
        """Refuse (POLICY_VIOLATION) ``adding`` partitions after ``earlier`` in this request."""
        problem = request_limit_problem(adding, earlier) or broker_limit_problem(
            self._broker.node_id,
            self._hosted() + earlier,
            adding,
            self._broker.config.get_int("pydmq.max.broker.partitions"),
        )
        if problem:
            raise TopicError(ErrorCode.POLICY_VIOLATION, problem)

    # -- creating topics --------------------------------------------------------------------

    def _taken_names(self) -> dict[str, str]:
        """Collision key ('.' as '_') -> name, for the topics existing and being created."""
        taken = {_collision_key(t.name): t.name for t in self._registry}
        taken.update((_collision_key(name), name) for name in self._creating)
        return taken

    def validate_new_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        assignments: Mapping[int, list[int]] | None = None,
        taken: Mapping[str, str] | None = None,
    ) -> tuple[int, int, dict[str, str]]:
        """Resolve defaults and validate; returns (partitions, replication factor, configs).

        ``taken``: the collision keys of existing topics (:meth:`_taken_names`; computed here
        when not given: a request of many topics computes it once)."""
        problem = topic_name_problem(name)
        if problem:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if self._registry.get(name) is not None or name in self._creating:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        existing = (self._taken_names() if taken is None else taken).get(_collision_key(name))
        if existing is not None:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {existing}",
            )
        broker_config = self._broker.config
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            self._validate_assignments(assignments, 0)
            num_partitions = len(assignments)
            replication_factor = len(next(iter(assignments.values())))
        if num_partitions == -1:
            num_partitions = broker_config.get_int("num.partitions")
        if replication_factor == -1:
            replication_factor = broker_config.get_int("default.replication.factor")
        if num_partitions <= 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        if replication_factor <= 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
            )
        live = len(self._live_brokers())
        if replication_factor > live:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): The target "
                f"replication factor of {replication_factor} cannot be reached because only "
                f"{live} broker(s) are registered.",
            )
        try:
            parsed = validate_topic_configs(configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        engine = parsed.get("pydmq.engine")
        if engine is not None and engine not in self._broker.replica_manager.engine_names():
            raise TopicError(ErrorCode.INVALID_CONFIG, f"unknown storage engine {engine!r}")
        explicit = {k: v for k, v in configs.items() if v is not None}
        return num_partitions, replication_factor, explicit

    def _validate_assignments(self, assignments: Mapping[int, list[int]], first: int) -> None:
        live = set(self._live_brokers())
        sizes = {len(replicas) for replicas in assignments.values()}
        if len(sizes) != 1:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "All partitions should have the same number of replicas",
            )
        if sorted(assignments) != list(range(first, first + len(assignments))):
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        for replicas in assignments.values():
            if len(set(replicas)) != len(replicas) or not replicas:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate or empty replica assignment"
                )
            unknown = [r for r in replicas if r not in live]
            if unknown:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {unknown[0]}, but no "
                    "broker with that id is registered.",
                )

    def _plan_topics(self, topics: Sequence[NewTopic]) -> list[TopicInfo | TopicError]:
        """Validate and admit each topic in order (later ones count the earlier ones)."""
        taken = self._taken_names()
        node = self._broker.node_id
        planned = 0
        out: list[TopicInfo | TopicError] = []
        for t in topics:
            try:
                partitions, _rf, explicit = self.validate_new_topic(
                    t.name, t.num_partitions, t.replication_factor, t.configs, t.assignments, taken
                )
                self._admit(partitions, planned)
            except TopicError as exc:
                out.append(exc)
                continue
            planned += partitions
            taken[_collision_key(t.name)] = t.name
            # single node: every replica set is [this node]
            out.append(
                TopicInfo(
                    name=t.name,
                    topic_id=uuid.uuid4(),
                    partitions=[
                        PartitionInfo(i, node, 0, [node], [node]) for i in range(partitions)
                    ],
                    configs=explicit,
                    internal=t.name in ("__consumer_offsets", "__transaction_state"),
                )
            )
        return out

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Create one topic now (synchronously); raises TopicError."""
        new = NewTopic(name, num_partitions, replication_factor, configs or {}, assignments)
        [result] = self.create_topics_now([new], validate_only)
        if isinstance(result, TopicError):
            raise result
        return result

    def create_topics_now(
        self, topics: Sequence[NewTopic], validate_only: bool = False
    ) -> list[TopicInfo | TopicError]:
        """Create ``topics`` synchronously (Metadata auto-creation, ``__consumer_offsets``):
        for callers that bound how many partitions they create at once."""
        plan = self._plan_topics(topics)
        if not validate_only:
            for _ in self._create(plan):
                pass
        return plan

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool = False
    ) -> list[TopicInfo | TopicError]:
        """CreateTopics: the result of each topic, in order (a TopicInfo or its error).
        Requests run one at a time; partitions are opened in chunks, yielding between."""
        async with self._serial:
            plan = self._plan_topics(topics)
            if not validate_only:
                await _run_in_chunks(self._create(plan))
            return plan

    def _create(self, plan: list[TopicInfo | TopicError]) -> Generator[None, None, None]:
        """Open the accepted topics' partitions, then register them with one save; on any
        failure remove every partition opened and turn each accepted topic into the error."""
        accepted = [t for t in plan if isinstance(t, TopicInfo)]
        if not accepted:
            return
        creation = PartitionCreation(self._broker)
        total = sum(len(t.partitions) for t in accepted)
        names = {t.name for t in accepted}
        self._creating |= names
        self._unopened += total
        try:
            yield from creation.steps([(t, range(len(t.partitions))) for t in accepted])
            self._unopened -= total
            total = 0
            self._registry.add_all(accepted)
        except Exception as exc:
            creation.rollback()
            error = TopicError(ErrorCode.KAFKA_STORAGE_ERROR, creation.failure(exc))
            plan[:] = [error if isinstance(t, TopicInfo) else t for t in plan]
            return
        except BaseException:  # abandoned (cancelled): nothing of it may stay
            creation.rollback()
            raise
        finally:
            self._creating -= names
            self._unopened -= total

    def delete_topic(self, name: str) -> TopicInfo:
        """DeleteTopics of one name, through the controller's operation; the topic deleted."""
        from pydmq.controller.operations import delete_topics

        topic = self._registry.get(name)
        controller = self._controller
        try:
            [result] = controller.run(
                lambda image: delete_topics(image, controller.operation_context, [name])
            )
        except KafkaStorageError as exc:
            raise _storage_error(f"Topic {name} could not be deleted", exc) from None
        if result.error_code != ErrorCode.NONE:
            raise TopicError(result.error_code, result.error_message or "")
        assert topic is not None  # the image had it, so the registry does
        return topic

    async def create_partitions(
        self, requests: Sequence[NewPartitions], validate_only: bool = False
    ) -> list[TopicError | None]:
        """CreatePartitions through the controller's ``create_partitions``: each topic's
        error, or None once grown. Like CreateTopics: one request at a time, admitted, opened
        in chunks, all or nothing, one metadata log entry."""
        from pydmq.controller.operations import CreatePartitionsTopic, create_partitions

        async with self._serial:
            controller = self._controller
            result = create_partitions(
                controller.image,
                controller.operation_context,
                [CreatePartitionsTopic(r.name, r.count, r.assignments) for r in requests],
                validate_only=validate_only,
            )
            results: list[TopicError | None] = [
                None
                if r.error_code == ErrorCode.NONE
                else TopicError(r.error_code, r.error_message or "")
                for r in result.response
            ]
            if result.records:
                growing = {r.name: i for i, r in enumerate(requests) if results[i] is None}
                await _run_in_chunks(self._grow(result.records, growing, results))
            return results

    def _grow(
        self,
        records: Sequence[MetadataRecord],
        growing: Mapping[str, int],
        results: list[TopicError | None],
    ) -> Generator[None, None, None]:
        """Open the partitions ``records`` add, then commit them; on any failure remove every
        partition opened and give each growing topic (``growing``: name -> its place in
        ``results``) the error. A topic deleted meanwhile is not grown."""
        added: dict[str, tuple[TopicInfo, list[PartitionRecord]]] = {}
        for rec in records:
            assert isinstance(rec, PartitionRecord)
            topic = self._registry.by_id(rec.topic_id)
            assert topic is not None  # the operation ran on the image the registry follows
            added.setdefault(topic.name, (topic, []))[1].append(rec)
        creation = PartitionCreation(self._broker)
        total = len(records)
        self._unopened += total
        try:
            yield from creation.steps(
                [
                    (
                        TopicInfo(
                            t.name,
                            t.topic_id,
                            t.partitions + [_partition_info(r) for r in new],
                            t.configs,
                            t.internal,
                        ),
                        range(len(t.partitions), len(t.partitions) + len(new)),
                    )
                    for t, new in added.values()
                ]
            )
            self._unopened -= total
            total = 0
            kept: list[MetadataRecord] = []
            for name, (topic, new) in added.items():
                if self._registry.by_id(topic.topic_id) is not None:
                    kept.extend(new)
                    continue
                creation.rollback(name)  # deleted while its partitions were being opened
                results[growing[name]] = TopicError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} was deleted."
                )
            self._controller.append(kept)
        except Exception as exc:
            creation.rollback()
            error = TopicError(ErrorCode.KAFKA_STORAGE_ERROR, creation.failure(exc))
            for i in growing.values():
                results[i] = results[i] or error
        except BaseException:  # abandoned (cancelled): nothing of it may stay
            creation.rollback()
            raise
        finally:
            self._unopened -= total

    def alter_topic_configs(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Replace a topic's explicit configs (AlterConfigs; IncrementalAlterConfigs ends here).

        Validates like CreateTopics (INVALID_CONFIG), refuses a change of the effective
        ``pydmq.engine``, then commits the new set, which the node's
        :class:`~pydmq.broker.metadata_publisher.LocalMetadataPublisher` applies to the hosted
        partitions.
        """
        topic = self._registry.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        explicit = {k: v for k, v in configs.items() if v is not None}
        broker_config = self._broker.config
        before = TopicConfig(broker_config, topic.configs).get_str("pydmq.engine")
        after_config = TopicConfig(broker_config, explicit)
        if after_config.get_str("pydmq.engine") != before:
            raise TopicError(
                ErrorCode.INVALID_CONFIG, "pydmq.engine cannot change after a topic is created"
            )
        if validate_only:
            return
        try:
            self._registry.set_configs(topic, explicit)
        except KafkaStorageError as exc:
            raise _storage_error(f"Configs of {name} could not be persisted", exc) from None

    def incremental_alter_topic_configs(
        self,
        name: str,
        operations: Sequence[tuple[str, int, str | None]],
        validate_only: bool = False,
    ) -> None:
        """Apply (name, operation, value) edits to a topic's explicit configs.

        Operations as Kafka's AlterConfigOp: SET 0, DELETE 1, APPEND 2 and SUBTRACT 3 (the
        last two for LIST configs only, starting from the explicit value or else the config's
        default). Errors: unknown operation or a null value to SET/APPEND/SUBTRACT ->
        INVALID_REQUEST; unknown name, bad value, APPEND/SUBTRACT on a non-list ->
        INVALID_CONFIG.
        """
        topic = self._registry.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
        configs: dict[str, str | None] = dict(topic.configs)
        for config_name, operation, value in operations:
            if operation not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}")
            if operation != OP_DELETE and value is None:
                raise TopicError(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {config_name}"
                )
            try:
                definition = check_known(config_name)
            except ConfigError as exc:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if operation == OP_SET:
                configs[config_name] = value
            elif operation == OP_DELETE:
                configs.pop(config_name, None)
            else:
                if definition.type != ConfigType.LIST:
                    verb = "append" if operation == OP_APPEND else "subtract"
                    raise TopicError(
                        ErrorCode.INVALID_CONFIG,
                        f"Config value {verb} is not allowed for config key: {config_name}",
                    )
                raw = configs.get(config_name)
                current = (
                    parse_value(ConfigType.LIST, raw, config_name)
                    if raw is not None
                    else definition.default
                )
                items = [str(v) for v in current] if isinstance(current, list | tuple) else []
                given = parse_value(ConfigType.LIST, value, config_name)
                assert isinstance(given, list)
                if operation == OP_APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                configs[config_name] = ",".join(items)
        self.alter_topic_configs(name, configs, validate_only)


def _partition_info(rec: PartitionRecord) -> PartitionInfo:
    return PartitionInfo(
        rec.partition_id, rec.leader, rec.leader_epoch, list(rec.replicas), list(rec.isr)
    )


async def _run_in_chunks(steps: Generator[None, None, None]) -> None:
    """Run a creation's steps, letting the event loop serve others between them; a cancelled
    caller closes the steps, whose rollback then removes what they opened."""
    try:
        for _ in steps:
            await asyncio.sleep(0)
    finally:
        steps.close()
