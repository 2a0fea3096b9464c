"""TopicOperations: a single node creates, deletes and grows topics and alters their configs.

Creation, deletion and growth run the controller's own operations
(:mod:`pydmq.controller.operations`: Kafka's rules and error codes, in the order Kafka's
controller applies them, admission by :mod:`pydmq.config.partition_limits`: at most 10,000
new partitions per request and ``pydmq.max.broker.partitions`` per node, POLICY_VIOLATION
beyond) on the node's :class:`~pydmq.controller.local.LocalController`, which commits their
records to the local metadata log. What is left here is what a node that opens its own
partitions adds around them:

- creation is all or nothing (:class:`~pydmq.broker.partition_creation.PartitionCreation`):
  the new partitions' logs are opened first and the records committed last, as one entry; a
  failure opening any log (or writing the entry) removes every partition the request opened
  and answers KAFKA_STORAGE_ERROR for each of its topics, nothing committed;
- CreateTopics and CreatePartitions run one request at a time (as Kafka's controller does)
  and open partitions in chunks between which the event loop serves other connections; the
  records of a creation in progress are seen by the operations run meanwhile (its names are
  taken, TOPIC_ALREADY_EXISTS; its partitions count as hosted), not by deletions and config
  changes (the topic does not exist yet); a topic deleted while its new partitions were being
  opened is not grown;
- ``__consumer_offsets`` is created synchronously (:meth:`TopicOperations.create_topic`).

Topic config changes (AlterConfigs, IncrementalAlterConfigs) run the controller's
``alter_configs`` and ``incremental_alter_configs``. A deletion or config change whose entry
cannot be written is refused with KAFKA_STORAGE_ERROR and changes nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydmq.broker.partition_creation import PartitionCreation
from pydmq.broker.topics import LocalTopicRegistry, PartitionInfo, TopicInfo
from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    TopicRecord,
)
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.topic_names import INTERNAL_TOPICS
from pydmq.storage.errors import KafkaStorageError

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.controller.local import LocalController
    from pydmq.controller.operations import (
        ConfigResourceResult,
        ControllerResult,
        OperationContext,
    )
    from pydmq.metadata.image import MetadataImage

__all__ = [
    "NewPartitions",
    "NewTopic",
    "TopicOperations",
]


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


class TopicOperations:
    """Owned by the broker; every change is committed through the LocalController."""

    def __init__(
        self, broker: Broker, registry: LocalTopicRegistry, controller: LocalController
    ) -> None:
        self._broker = broker
        self._registry = registry
        self._controller = controller
        self._serial = asyncio.Lock()  # CreateTopics / CreatePartitions, one at a time
        # The records of creations whose partitions are being opened: a creation meanwhile
        # sees them (their names are taken, their partitions count as hosted).
        self._pending: list[Sequence[MetadataRecord]] = []

    def _working_image(self) -> MetadataImage:
        """The committed image with the records of the creations in progress."""
        image = self._controller.image
        if not self._pending:
            return image
        from pydmq.controller.operations import image_after

        return image_after(image, [rec for records in self._pending for rec in records])

    # -- creating topics --------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
    ) -> TopicInfo:
        """Create one topic now, synchronously (``__consumer_offsets``); raises TopicError."""
        new = NewTopic(name, num_partitions, replication_factor, configs or {})
        plan, records = self._plan_topics([new])
        for _ in self._create(plan, records):
            pass
        [result] = plan
        if isinstance(result, TopicError):
            raise result
        topic = self._registry.get(name)
        assert topic is not None  # committed
        return topic

    async def create_topics(
        self, topics: Sequence[NewTopic], validate_only: bool = False
    ) -> list[TopicInfo | TopicError]:
        """CreateTopics through the controller's ``create_topics``: the result of each topic,
        in order (the topic as created, or its error). Requests run one at a time; partitions
        are opened in chunks, yielding between, before the records are committed."""
        async with self._serial:
            plan, records = self._plan_topics(topics)
            if not validate_only:
                await _run_in_chunks(self._create(plan, records))
            return plan

    def _plan_topics(
        self, topics: Sequence[NewTopic]
    ) -> tuple[list[TopicInfo | TopicError], list[MetadataRecord]]:
        """Each topic as the operation would create it (or its error), and the records."""
        from pydmq.controller.operations import CreatableTopic, create_topics

        result = create_topics(
            self._working_image(),
            self._controller.operation_context,
            [
                CreatableTopic(
                    t.name, t.num_partitions, t.replication_factor, t.assignments, t.configs
                )
                for t in topics
            ],
        )
        created = _topics_of(result.records)
        plan: list[TopicInfo | TopicError] = [
            created[r.name]
            if r.error_code == ErrorCode.NONE
            else TopicError(r.error_code, r.error_message or "")
            for r in result.response
        ]
        return plan, result.records

    def _create(
        self, plan: list[TopicInfo | TopicError], records: Sequence[MetadataRecord]
    ) -> Generator[None, None, None]:
        """Open the planned topics' partitions, then commit their records; on any failure
        remove every partition opened and turn each planned topic into the error."""
        if not records:
            return
        accepted = [t for t in plan if isinstance(t, TopicInfo)]
        creation = PartitionCreation(self._broker)
        self._pending.append(records)
        try:
            yield from creation.steps([(t, range(len(t.partitions))) for t in accepted])
            self._pending = [p for p in self._pending if p is not records]
            self._controller.append(records)
        except Exception as exc:
            creation.rollback()
            error = TopicError(ErrorCode.KAFKA_STORAGE_ERROR, creation.failure(exc))
            plan[:] = [error if isinstance(t, TopicInfo) else t for t in plan]
        except BaseException:  # abandoned (cancelled): nothing of it may stay
            creation.rollback()
            raise
        finally:
            self._pending = [p for p in self._pending if p is not records]

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
                self._working_image(),
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
        self._pending.append(records)
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
            self._pending = [p for p in self._pending if p is not records]
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
            self._pending = [p for p in self._pending if p is not records]

    def alter_topic_configs(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """AlterConfigs of one topic (its complete new set of explicit configs), through the
        controller's ``alter_configs``; raises TopicError."""
        from pydmq.controller.operations import AlterConfigsResource, alter_configs

        resource = AlterConfigsResource(RESOURCE_TOPIC, name, configs)
        self._change_configs(
            name,
            lambda image, context: alter_configs(
                image, context, [resource], validate_only=validate_only
            ),
        )

    def incremental_alter_topic_configs(
        self,
        name: str,
        operations: Sequence[tuple[str, int, str | None]],
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs of one topic ((name, operation, value) edits), through the
        controller's ``incremental_alter_configs``; raises TopicError."""
        from pydmq.controller.operations import (
            IncrementalAlterConfigsResource,
            incremental_alter_configs,
        )

        resource = IncrementalAlterConfigsResource(RESOURCE_TOPIC, name, operations)
        self._change_configs(
            name,
            lambda image, context: incremental_alter_configs(
                image, context, [resource], validate_only=validate_only
            ),
        )

    def _change_configs(
        self,
        name: str,
        operation: Callable[
            [MetadataImage, OperationContext], ControllerResult[list[ConfigResourceResult]]
        ],
    ) -> None:
        """Run a config operation of topic ``name``; the node's publisher applies the change
        to the hosted partitions once committed."""
        controller = self._controller
        try:
            [result] = controller.run(lambda image: operation(image, controller.operation_context))
        except KafkaStorageError as exc:
            raise _storage_error(f"Configs of {name} could not be persisted", exc) from None
        if result.error_code != ErrorCode.NONE:
            raise TopicError(result.error_code, result.error_message or "")


def _topics_of(records: Sequence[MetadataRecord]) -> dict[str, TopicInfo]:
    """The topics ``records`` create, by name, as they will be once committed."""
    topics: dict[str, TopicInfo] = {}
    by_id: dict[uuid.UUID, TopicInfo] = {}
    for rec in records:
        if isinstance(rec, TopicRecord):
            topic = TopicInfo(rec.name, rec.topic_id, [], internal=rec.name in INTERNAL_TOPICS)
            topics[rec.name] = by_id[rec.topic_id] = topic
        elif isinstance(rec, ConfigRecord) and rec.value is not None:
            topics[rec.resource_name].configs[rec.name] = rec.value
        elif isinstance(rec, PartitionRecord):
            by_id[rec.topic_id].partitions.append(_partition_info(rec))
    return topics


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
