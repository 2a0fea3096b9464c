"""The single-node topic registry's checkpoint (``topics.json``) round trip."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from pydmq.broker.topics import PartitionInfo, TopicInfo, TopicRegistry


def test_topics_json_round_trip(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path)
    first = TopicInfo(
        name="orders",
        topic_id=uuid.uuid4(),
        partitions=[PartitionInfo(i, 1, 2, [1], [1]) for i in range(3)],
        configs={"retention.ms": "1000"},
    )
    odd = TopicInfo(name='we"ird\n', topic_id=uuid.uuid4(), partitions=[], internal=True)
    registry.add(first)
    registry.add(odd)
    doc = json.loads((tmp_path / "topics.json").read_text())
    assert [t["name"] for t in doc["topics"]] == ["orders", 'we"ird\n']
    loaded = TopicRegistry(tmp_path)
    assert loaded.get("orders") == first
    assert loaded.get('we"ird\n') == odd
    registry.remove("orders")
    registry.remove('we"ird\n')
    assert list(TopicRegistry(tmp_path)) == []
