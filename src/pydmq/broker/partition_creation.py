"""PartitionCreation: a single node opens the logs of one result's new partitions, all or nothing.

The node's :class:`~pydmq.controller.local.LocalController` prepares every result whose
records create partitions (CreateTopics, CreatePartitions, auto-creation) with
:func:`prepare_partitions` before committing them: each new partition's log is opened here
(the segment engine creates nothing on disk until a partition's first write, so this costs
~50 us of Python per partition and no file descriptor). If opening any of them fails (EMFILE,
ENOSPC, a plugin engine's error), the metadata log refuses the entry, or the request is
abandoned (its task cancelled, the broker stopping), :meth:`PartitionCreation.rollback`
deletes every partition this request opened, so no directory, index entry or hosted
partition outlives a creation the metadata log never recorded.

:meth:`PartitionCreation.steps` yields every :data:`OPEN_CHUNK` partitions so that the
controller can let the event loop serve other connections between chunks: opening 10,000
partitions in one go stalled every other client for about half a second.

One per result; used on the broker's event loop.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydmq.config.topic import TopicConfig
from pydmq.metadata.records import ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker
    from pydmq.metadata.image import MetadataImage

__all__ = ["OPEN_CHUNK", "PartitionCreation", "prepare_partitions"]

log = logging.getLogger(__name__)

OPEN_CHUNK = 250
"""Partitions opened between two yields: ~15 ms of the event loop (~60 us each under load)."""


@dataclass(slots=True)
class _TopicPartitions:
    """The partitions a result adds to one topic, with the topic's explicit configs."""

    name: str
    topic_id: uuid.UUID
    configs: Mapping[str, str]
    partitions: list[PartitionRecord] = field(default_factory=list)


def prepare_partitions(
    broker: Broker, image: MetadataImage, records: Sequence[MetadataRecord]
) -> PartitionCreation | None:
    """The creation of the partitions ``records`` add (to new topics or to topics of
    ``image``), or None when they add none (a :data:`~pydmq.controller.local.CommitPreparer`)."""
    if not any(isinstance(rec, PartitionRecord) for rec in records):
        return None
    new_topics: dict[uuid.UUID, str] = {}
    new_configs: dict[str, dict[str, str]] = {}
    adding: dict[uuid.UUID, _TopicPartitions] = {}
    for rec in records:
        if isinstance(rec, TopicRecord):
            new_topics[rec.topic_id] = rec.name
        elif isinstance(rec, ConfigRecord) and rec.value is not None:
            new_configs.setdefault(rec.resource_name, {})[rec.name] = rec.value
        elif isinstance(rec, PartitionRecord):
            topic = adding.get(rec.topic_id)
            if topic is None:
                name = new_topics.get(rec.topic_id)
                if name is None:
                    name = image.topics.by_id[rec.topic_id].name
                    configs = image.topic_config(name)
                else:
                    configs = new_configs.get(name, {})
                topic = adding[rec.topic_id] = _TopicPartitions(name, rec.topic_id, configs)
            topic.partitions.append(rec)
    return PartitionCreation(broker, list(adding.values()))


class PartitionCreation:
    """The partitions one result opens, per topic, so that they can all be removed again."""

    def __init__(self, broker: Broker, topics: Sequence[_TopicPartitions]) -> None:
        self._broker = broker
        self._topics = topics
        self.opened: dict[str, list[TopicPartition]] = {}
        self.failed_at: TopicPartition | None = None
        self._engine_of: dict[str, str] = {}  # topic -> its storage engine

    def steps(self) -> Iterator[None]:
        """Open every new partition (leader here, as in single-node mode), yielding after
        every :data:`OPEN_CHUNK`. An exception leaves what was opened in :attr:`opened` and
        the partition that failed in :attr:`failed_at`."""
        replica_manager = self._broker.replica_manager
        opened = 0
        for topic in self._topics:
            config = TopicConfig(self._broker.config, dict(topic.configs))
            self._engine_of[topic.name] = config.get_str("pydmq.engine")
            done = self.opened.setdefault(topic.name, [])
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_id)
                self.failed_at = tp
                replica_manager.make_leader(
                    tp, topic.topic_id, config, p.leader_epoch, list(p.replicas), list(p.isr)
                )
                done.append(tp)
                opened += 1
                if opened % OPEN_CHUNK == 0:
                    yield
        self.failed_at = None

    def rollback(self) -> None:
        """Delete every partition opened."""
        replica_manager = self._broker.replica_manager
        for name in list(self.opened):
            engine = self._engine_of.get(name, "")
            for tp in reversed(self.opened.pop(name, [])):
                try:
                    replica_manager.delete_partition(tp, engine)
                except Exception:
                    log.exception("removing %s of an abandoned creation failed", tp)

    def failure(self, exc: BaseException) -> str:
        """What went wrong, for the error every topic of a failed request gets."""
        where = (
            f" opening {self.failed_at.topic}-{self.failed_at.partition}" if self.failed_at else ""
        )
        return f"Storage error{where}: {exc}. Nothing of this request was created."
