"""PartitionCreation: opens the logs of one request's new partitions, all or nothing.

A CreateTopics or CreatePartitions request opens every new partition's log here (the segment
engine creates nothing on disk until a partition's first write, so this costs ~50 us of Python
per partition and no file descriptor). If opening any of them fails (EMFILE, ENOSPC, a plugin
engine's error), or the request is abandoned (its task cancelled, the broker stopping),
:meth:`PartitionCreation.rollback` deletes every partition this request opened, so no
directory, index entry or hosted partition outlives a creation the registry never recorded.

:meth:`PartitionCreation.steps` yields every :data:`OPEN_CHUNK` partitions so that an
asynchronous caller can let the event loop serve other connections between chunks: opening
10,000 partitions in one go stalled every other client for about half a second.

One per request; used on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pydmq.broker.topics import TopicInfo
from pydmq.config.topic import TopicConfig
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["OPEN_CHUNK", "PartitionCreation"]

log = logging.getLogger(__name__)

OPEN_CHUNK = 250
"""Partitions opened between two yields: ~15 ms of the event loop (~60 us each under load)."""


class PartitionCreation:
    """The partitions one request opened, per topic, so that they can all be removed again."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.opened: dict[str, list[TopicPartition]] = {}
        self.failed_at: TopicPartition | None = None
        self._engine_of: dict[str, str] = {}  # topic -> its storage engine

    @property
    def count(self) -> int:
        return sum(len(tps) for tps in self.opened.values())

    def steps(self, additions: Sequence[tuple[TopicInfo, range]]) -> Iterator[None]:
        """Open partitions ``indexes`` of each topic (leader here, as in single-node mode),
        yielding after every :data:`OPEN_CHUNK`. An exception leaves what was opened in
        :attr:`opened` and the partition that failed in :attr:`failed_at`."""
        replica_manager = self._broker.replica_manager
        opened = 0
        for topic, indexes in additions:
            config = TopicConfig(self._broker.config, topic.configs)
            self._engine_of[topic.name] = config.get_str("pydmq.engine")
            done = self.opened.setdefault(topic.name, [])
            for index in indexes:
                p = topic.partitions[index]
                tp = TopicPartition(topic.name, index)
                self.failed_at = tp
                replica_manager.make_leader(
                    tp, topic.topic_id, config, p.leader_epoch, p.replicas, p.isr
                )
                done.append(tp)
                opened += 1
                if opened % OPEN_CHUNK == 0:
                    yield
        self.failed_at = None

    def rollback(self, topic: str | None = None) -> None:
        """Delete the partitions opened for ``topic`` (every topic by default)."""
        names = list(self.opened) if topic is None else [topic]
        replica_manager = self._broker.replica_manager
        for name in names:
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
