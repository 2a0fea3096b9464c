"""TopicOperations: create, delete and grow topics with Kafka's validation and error codes.

Used by CreateTopics, DeleteTopics, CreatePartitions and Metadata auto-creation, so all of them
apply the same rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.broker.topic_names import topic_name_problem
from pydmq.broker.topics import PartitionInfo, TopicInfo
from pydmq.config.definitions import ConfigError
from pydmq.config.topic import TopicConfig, validate_topic_configs
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["TopicError", "TopicOperations"]

_MAX_PARTITIONS = 100_000


@dataclass(frozen=True, slots=True)
class TopicError(Exception):
    """A refused topic operation: a Kafka error code and a message for the client."""

    error_code: int
    message: str


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
            internal=name.startswith("__") and name in ("__consumer_offsets", "__transaction_state"),
        )
        del rf  # single node: every replica set is [this node]
        if validate_only:
            return topic
        self._broker.topics.add(topic)
        self._open_partitions(topic, range(partitions))
        self._broker.plugins.on_topic_created(name, str(topic.topic_id), partitions)
        return topic

    def _open_partitions(self, topic: TopicInfo, indexes: range) -> None:
        config = TopicConfig(self._broker.config, topic.configs)
        for index in indexes:
            p = topic.partitions[index]
            self._broker.replica_manager.make_leader(
                TopicPartition(topic.name, index), topic.topic_id, config,
                p.leader_epoch, p.replicas, p.isr,
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
        self._broker.topics.remove(name)
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
        topic.partitions.extend(PartitionInfo(i, node, 0, [node], [node]) for i in range(current, count))
        self._broker.topics.save()
        self._open_partitions(topic, range(current, count))

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._broker.topics.get(name)
        if topic is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist."
            )
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if configs.get("pydmq.engine", topic.configs.get("pydmq.engine")) != topic.configs.get(
            "pydmq.engine"
        ):
            raise TopicError(
                ErrorCode.INVALID_CONFIG, "pydmq.engine cannot change after a topic is created"
            )
        topic.configs = dict(configs)
        self._broker.topics.save()
        self._broker.replica_manager.update_config(name, TopicConfig(self._broker.config, configs))
