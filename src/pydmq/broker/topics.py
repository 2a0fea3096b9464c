"""Topic registries: the topics a node serves (names, ids, partitions, epochs, configs).

:class:`TopicRegistry` is the in-memory registry the handlers read in both modes. In cluster
mode the controller's metadata image is the truth and a broker's registry
(:class:`~pydmq.broker.cluster.metadata_cache.MetadataCache`) is fed by UpdateMetadata.

A single node's registry is :class:`LocalTopicRegistry`: a view of the image of its local
controller (:class:`~pydmq.controller.local.LocalController`, over the local metadata log
replayed at start). Every change is committed there as records (one entry per change) and
the registry follows each delta.

Before the metadata log, a single node kept its topics in ``topics.json``: on the first start
with an empty log that file is converted into the log's first entry and renamed
``topics.json.converted`` (a backup, never read again).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    TopicRecord,
)
from pydmq.protocol.topic_names import INTERNAL_TOPICS
from pydmq.storage.checkpoint import fsync_dir

if TYPE_CHECKING:
    from pydmq.controller.local import LocalController
    from pydmq.controller.local_log import LocalMetadataLog
    from pydmq.metadata.delta import MetadataDelta
    from pydmq.metadata.image import MetadataImage

__all__ = [
    "CONVERTED_SUFFIX",
    "LEGACY_FILE",
    "LocalTopicRegistry",
    "PartitionInfo",
    "TopicInfo",
    "TopicRegistry",
]

LEGACY_FILE = "topics.json"
CONVERTED_SUFFIX = ".converted"


@dataclass(slots=True)
class PartitionInfo:
    """One partition's placement: leader, replicas, ISR and leader epoch."""

    index: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass(slots=True)
class TopicInfo:
    """A topic: name, id, partitions and its explicit (non-default) configs."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionInfo]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class TopicRegistry:
    """Topics by name and by id, in memory. Owned by the broker's event loop."""

    def __init__(self) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def add(self, topic: TopicInfo) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def remove(self, name: str) -> TopicInfo | None:
        topic = self._by_name.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        return topic


class LocalTopicRegistry(TopicRegistry):
    """A single node's topics: the view of its local controller's image (module docstring).

    Owned by the broker's event loop. Changes are committed by the controller's operations;
    the topics each delta touches are then rebuilt from the new image (existing
    :class:`TopicInfo` objects are updated in place, so a handler holding one sees the
    change).
    """

    def __init__(self, controller: LocalController, metadata_dir: Path) -> None:
        super().__init__()
        self._controller = controller
        _convert_legacy_file(controller.metadata_log, metadata_dir / LEGACY_FILE)
        image = controller.image
        for topic in image.topics.by_id.values():
            self._refresh(image, topic.topic_id)
        controller.add_listener(self.apply)

    # -- following the image ------------------------------------------------------------

    def apply(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Follow one committed delta (a :class:`LocalController` listener)."""
        for gone in delta.deleted_topics().values():
            self.remove(gone.name)
        touched: set[uuid.UUID] = set(delta.created_topics())
        touched.update(topic_id for topic_id, _ in delta.changed_partitions())
        for resource_type, resource in delta.changed_config_resources():
            topic = image.topics.by_name.get(resource)
            if resource_type == RESOURCE_TOPIC and topic is not None:
                touched.add(topic.topic_id)
        for topic_id in touched:
            if topic_id in image.topics.by_id:
                self._refresh(image, topic_id)

    def _refresh(self, image: MetadataImage, topic_id: uuid.UUID) -> None:
        """(Re)build the TopicInfo of ``topic_id`` from ``image``."""
        topic = image.topics.by_id[topic_id]
        partitions = [
            PartitionInfo(index, p.leader, p.leader_epoch, list(p.replicas), list(p.isr))
            for index, p in sorted(topic.partitions.items())
        ]
        configs = image.topic_config(topic.name)
        info = self._by_id.get(topic_id)
        if info is None:
            self.add(
                TopicInfo(topic.name, topic_id, partitions, configs, topic.name in INTERNAL_TOPICS)
            )
        else:
            info.partitions = partitions
            info.configs = configs


def _topic_records(topic: TopicInfo) -> Iterable[MetadataRecord]:
    """The records creating ``topic`` as it is (name, id, configs, partitions)."""
    yield TopicRecord(topic.name, topic.topic_id)
    for key, value in topic.configs.items():
        yield ConfigRecord(RESOURCE_TOPIC, topic.name, key, value)
    for p in topic.partitions:
        yield _partition_record(topic, p)


def _partition_record(topic: TopicInfo, p: PartitionInfo) -> PartitionRecord:
    return PartitionRecord(
        partition_id=p.index,
        topic_id=topic.topic_id,
        replicas=tuple(p.replicas),
        isr=tuple(p.isr),
        removing_replicas=(),
        adding_replicas=(),
        leader=p.leader,
        leader_recovery_state=0,
        leader_epoch=p.leader_epoch,
        partition_epoch=0,
    )


def _convert_legacy_file(metadata_log: LocalMetadataLog, path: Path) -> None:
    """Convert ``topics.json`` into the first entry of an empty log, then rename it.

    A crash after the entry was flushed and before the rename leaves the file in place with
    a log that holds it: the file is then renamed without being read again."""
    if not path.exists():
        return
    if metadata_log.is_empty:
        records = [rec for topic in _read_legacy_file(path) for rec in _topic_records(topic)]
        if records:
            metadata_log.append(records)
    os.replace(path, path.with_name(path.name + CONVERTED_SUFFIX))
    fsync_dir(str(path.parent))


def _read_legacy_file(path: Path) -> list[TopicInfo]:
    """The topics of a ``topics.json`` written by an earlier release."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return [
        TopicInfo(
            name=t["name"],
            topic_id=uuid.UUID(t["topic_id"]),
            internal=bool(t.get("internal", False)),
            configs={str(k): str(v) for k, v in t["configs"].items()},
            partitions=[
                PartitionInfo(
                    p["index"], p["leader"], p["leader_epoch"], list(p["replicas"]), list(p["isr"])
                )
                for p in t["partitions"]
            ],
        )
        for t in doc["topics"]
    ]
