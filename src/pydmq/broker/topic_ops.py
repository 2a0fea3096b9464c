"""TopicOperations: create, delete and grow topics with Kafka's validation and error codes.

Used by CreateTopics, DeleteTopics, CreatePartitions and Metadata auto-creation, so all of them
apply the same rules. A change the registry cannot persist, or whose partitions cannot be
created on disk, is refused with KAFKA_STORAGE_ERROR and undone: nothing is half-created.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.broker.topic_names import topic_name_problem
from pydmq.broker.topics import PartitionInfo, TopicInfo
from pydmq.config.definitions import ConfigError, ConfigType, parse_value
from pydmq.config.topic import TopicConfig, check_known, validate_topic_configs
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = [
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "TopicError",
    "TopicOperations",
]

_MAX_PARTITIONS = 100_000

# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType ids)
OP_SET = 0
OP_DELETE = 1
OP_APPEND = 2
OP_SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class TopicError(Exception):
    """A refused topic operation: a Kafka error code and a message for the client."""

    error_code: int
    message: str


def _storage_error(what: str, exc: BaseException) -> TopicError:
    reason = exc.message if isinstance(exc, KafkaStorageError) else str(exc)
    return TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"{what}: {reason}")


class TopicOperations:
    """Owned by the broker; every mutation is persisted through the TopicRegistry."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def _live_brokers(self) -> list[int]:
        return [self._broker.node_id]

    def validate_new_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        assignments: Mapping[int, list[int]] | None = None,
    ) -> tuple[int, int, dict[str, str]]:
        """Resolve defaults and validate; returns (partitions, replication factor, configs)."""
        problem = topic_name_problem(name)
        if problem:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        registry = self._broker.topics
        if registry.get(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for existing in registry:
            if existing.name.replace(".", "_") == collision:
                raise TopicError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {existing.name}",
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
        if num_partitions <= 0 or num_partitions > _MAX_PARTITIONS:
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

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        partitions, rf, explicit = self.validate_new_topic(
            name, num_partitions, replication_factor, configs or {}, assignments
        )
        node = self._broker.node_id
        topic = TopicInfo(
            name=name,
            topic_id=uuid.uuid4(),
            partitions=[PartitionInfo(i, node, 0, [node] * 1, [node]) for i in range(partitions)],
            configs=explicit,
            internal=name.startswith("__")
            and name in ("__consumer_offsets", "__transaction_state"),
        )
        del rf  # single node: every replica set is [this node]
        if validate_only:
            return topic
        try:
            self._broker.topics.add(topic)
        except OSError as exc:
            raise _storage_error(f"Topic {name} could not be persisted", exc) from None
        try:
            self._open_partitions(topic, range(partitions))
        except (OSError, KafkaStorageError) as exc:
            self._undo_partitions(topic, range(partitions))
            # If this fails too, the registry keeps the topic: its logs are created empty at
            # the next start.
            with contextlib.suppress(OSError):
                self._broker.topics.remove(name)
            raise _storage_error(f"Topic {name} could not be created", exc) from None
        self._broker.plugins.on_topic_created(name, str(topic.topic_id), partitions)
        return topic

    def _undo_partitions(self, topic: TopicInfo, indexes: range) -> None:
        """Delete the logs of ``indexes`` that a failed creation opened."""
        engine = TopicConfig(self._broker.config, topic.configs).get_str("pydmq.engine")
        for index in indexes:
            tp = TopicPartition(topic.name, index)
            if self._broker.replica_manager.get(tp) is not None:
                # Best effort: the partition is not in the registry any more.
                with contextlib.suppress(OSError, KafkaStorageError):
                    self._broker.replica_manager.delete_partition(tp, engine)

    def _open_partitions(self, topic: TopicInfo, indexes: range) -> None:
        config = TopicConfig(self._broker.config, topic.configs)
        for index in indexes:
            p = topic.partitions[index]
            self._broker.replica_manager.make_leader(
                TopicPartition(topic.name, index),
                topic.topic_id,
                config,
                p.leader_epoch,
                p.replicas,
                p.isr,
            )

    def delete_topic(self, name: str) -> TopicInfo:
        if not self._broker.config.get_bool("delete.topic.enable"):
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        topic = self._broker.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        engine = TopicConfig(self._broker.config, topic.configs).get_str("pydmq.engine")
        try:
            self._broker.topics.remove(name)
        except OSError as exc:
            raise _storage_error(f"Topic {name} could not be deleted", exc) from None
        for p in topic.partitions:
            self._broker.replica_manager.delete_partition(TopicPartition(name, p.index), engine)
        self._broker.fetch_sessions.forget_topic(name)
        self._broker.plugins.on_topic_deleted(name, str(topic.topic_id))
        return topic

    def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None,
        validate_only: bool,
    ) -> None:
        topic = self._broker.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        current = len(topic.partitions)
        if count < current:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{count}.",
            )
        if count == current:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions."
            )
        if count > _MAX_PARTITIONS:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Too many partitions.")
        added = count - current
        if assignments is not None:
            if len(assignments) != added:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            self._validate_assignments(
                {current + i: list(a) for i, a in enumerate(assignments)}, current
            )
        if validate_only:
            return
        node = self._broker.node_id
        topic.partitions.extend(
            PartitionInfo(i, node, 0, [node], [node]) for i in range(current, count)
        )
        try:
            self._broker.topics.save()
            self._open_partitions(topic, range(current, count))
        except (OSError, KafkaStorageError) as exc:
            self._undo_partitions(topic, range(current, count))
            del topic.partitions[current:]
            # If this fails too, the file keeps the new partitions: created empty at start.
            with contextlib.suppress(OSError):
                self._broker.topics.save()
            raise _storage_error(f"Partitions of {name} could not be created", exc) from None

    def alter_topic_configs(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Replace a topic's explicit configs (AlterConfigs; IncrementalAlterConfigs ends here).

        Validates like CreateTopics (INVALID_CONFIG), refuses a change of the effective
        ``pydmq.engine``, then persists the new set and applies it to the hosted partitions:
        append policy and min ISR (ReplicaManager.update_config) and the engine log's
        retention/segment/flush settings.
        """
        topic = self._broker.topics.get(name)
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
        previous, topic.configs = topic.configs, explicit
        try:
            self._broker.topics.save()
        except OSError as exc:
            topic.configs = previous
            raise _storage_error(f"Configs of {name} could not be persisted", exc) from None
        replica_manager = self._broker.replica_manager
        replica_manager.update_config(name, after_config)
        log_config = after_config.log_config()
        for tp, partition in list(replica_manager.partitions.items()):
            if tp.topic != name:
                continue
            # Both built-in engines read their LogConfig from ``config`` on every decision;
            # an engine without that attribute keeps the settings it was opened with.
            engine_log = partition.log.engine_log
            if isinstance(getattr(engine_log, "config", None), LogConfig):
                engine_log.config = log_config  # type: ignore[attr-defined]

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
        topic = self._broker.topics.get(name)
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
