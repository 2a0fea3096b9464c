"""The single node's topic registry: a view of its local metadata log, replayed at start.

Every change is an entry of the log; a registry reopened on the same directory (a restart)
replays the log (and its snapshot) to the same topics. A ``topics.json`` left by an earlier
release is converted into the log once and kept as ``topics.json.converted``, never read again.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from pydmq.broker.topics import LocalTopicRegistry, PartitionInfo, TopicInfo
from pydmq.config.broker import BrokerConfig
from pydmq.controller.local import LocalController
from pydmq.controller.local_log import LocalMetadataLog
from pydmq.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pydmq.plugins.host import PluginHost
from pydmq.storage.api import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.nodes import broker_of

pytestmark = pytest.mark.timeout(60)


def open_node(
    metadata_dir: Path, snapshot_every: int = 1000
) -> tuple[LocalController, LocalTopicRegistry]:
    metadata_log = LocalMetadataLog(
        metadata_dir / "metadata-log", snapshot_interval_records=snapshot_every
    )
    controller = LocalController(metadata_log, BrokerConfig(), PluginHost(load_entry_points=False))
    return controller, LocalTopicRegistry(controller, metadata_dir)


def open_registry(metadata_dir: Path, snapshot_every: int = 1000) -> LocalTopicRegistry:
    return open_node(metadata_dir, snapshot_every)[1]


def state(registry: LocalTopicRegistry) -> list[TopicInfo]:
    return sorted(registry, key=lambda t: t.name)


def orders() -> TopicInfo:
    return TopicInfo(
        name="orders",
        topic_id=uuid.uuid4(),
        partitions=[PartitionInfo(i, 1, 2, [1], [1]) for i in range(3)],
        configs={"retention.ms": "1000"},
    )


def creation(topic: TopicInfo) -> list[MetadataRecord]:
    """The records creating ``topic``, as the controller's create_topics writes them."""
    records: list[MetadataRecord] = [TopicRecord(topic.name, topic.topic_id)]
    records += [ConfigRecord(RESOURCE_TOPIC, topic.name, k, v) for k, v in topic.configs.items()]
    records += [partition(topic, p) for p in topic.partitions]
    return records


def partition(topic: TopicInfo, p: PartitionInfo) -> PartitionRecord:
    return PartitionRecord(
        p.index, topic.topic_id, tuple(p.replicas), tuple(p.isr), (), (), p.leader, 0,
        p.leader_epoch, 0,
    )  # fmt: skip


@pytest.mark.parametrize("snapshot_every", [1000, 3])
def test_a_reopened_registry_replays_every_change(tmp_path: Path, snapshot_every: int) -> None:
    controller, registry = open_node(tmp_path, snapshot_every)
    first = orders()
    internal = TopicInfo("__consumer_offsets", uuid.uuid4(), [PartitionInfo(0, 1, 0, [1], [1])])
    doomed = TopicInfo("doomed", uuid.uuid4(), [PartitionInfo(0, 1, 0, [1], [1])])
    controller.append(creation(first) + creation(internal) + creation(doomed))
    held = registry.get("orders")
    assert held is not None
    controller.append([partition(held, PartitionInfo(3, 1, 0, [1], [1]))])
    controller.append(
        [
            ConfigRecord(RESOURCE_TOPIC, "orders", "retention.ms", None),
            ConfigRecord(RESOURCE_TOPIC, "orders", "cleanup.policy", "compact"),
        ]
    )
    controller.append([RemoveTopicRecord(doomed.topic_id)])

    assert [p.index for p in held.partitions] == [0, 1, 2, 3]  # changed in place
    assert held.configs == {"cleanup.policy": "compact"}
    assert registry.get("doomed") is None and registry.by_id(doomed.topic_id) is None
    offsets = registry.get("__consumer_offsets")
    assert offsets is not None and offsets.internal
    assert registry.by_id(first.topic_id) is held
    controller.metadata_log.close()  # the snapshot thread's last snapshot is adopted
    reopened = open_registry(tmp_path, snapshot_every)
    assert state(reopened) == state(registry)
    snapshots = list((tmp_path / "metadata-log").glob("*.checkpoint"))
    assert bool(snapshots) == (snapshot_every == 3)


def write_legacy_file(metadata_dir: Path, topic: TopicInfo) -> None:
    """topics.json as releases before the metadata log wrote it."""
    doc = {
        "version": 1,
        "topics": [
            {
                "name": topic.name,
                "topic_id": str(topic.topic_id),
                "internal": topic.internal,
                "configs": topic.configs,
                "partitions": [
                    {
                        "index": p.index,
                        "leader": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replicas": p.replicas,
                        "isr": p.isr,
                    }
                    for p in topic.partitions
                ],
            }
        ],
    }
    metadata_dir.mkdir(parents=True, exist_ok=True)
    (metadata_dir / "topics.json").write_text(json.dumps(doc))


def test_topics_json_is_converted_once_and_kept_as_a_backup(tmp_path: Path) -> None:
    legacy = orders()
    write_legacy_file(tmp_path, legacy)
    controller, registry = open_node(tmp_path)
    assert state(registry) == [legacy]
    assert not (tmp_path / "topics.json").exists()
    backup = tmp_path / "topics.json.converted"
    assert json.loads(backup.read_text())["topics"][0]["name"] == "orders"

    converted = registry.get("orders")
    assert converted is not None
    controller.append([RemoveTopicRecord(converted.topic_id)])
    assert state(open_registry(tmp_path)) == []  # the backup is not read again


def test_a_topics_json_left_beside_a_converted_log_is_not_read_again(tmp_path: Path) -> None:
    """A crash after the conversion's entry and before the rename: the log wins."""
    legacy = orders()
    write_legacy_file(tmp_path, legacy)
    controller, _ = open_node(tmp_path)
    controller.append([ConfigRecord(RESOURCE_TOPIC, "orders", "retention.ms", None)])
    write_legacy_file(tmp_path, legacy)
    reopened = open_registry(tmp_path)
    assert [t.configs for t in reopened] == [{}]
    assert not (tmp_path / "topics.json").exists()


def test_a_node_started_on_a_topics_json_serves_its_topics(tmp_path: Path) -> None:
    legacy = orders()
    write_legacy_file(tmp_path / "__pydmq_metadata", legacy)
    config = BrokerConfig({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0"})
    broker = broker_of(config)
    try:
        broker.open_logs()
        assert sorted(broker.replica_manager.partitions) == [
            TopicPartition("orders", i) for i in range(3)
        ]
        assert broker.topic_config("orders").get_int("retention.ms") == 1000
        partition = broker.replica_manager.partitions[TopicPartition("orders", 0)]
        assert partition.leader_epoch == 2
    finally:
        broker.replica_manager.shutdown()
