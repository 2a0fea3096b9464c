"""``__consumer_offsets`` is created with Kafka's group-coordinator configs in both modes:
compacted, the producer's compression, ``offsets.topic.segment.bytes`` segments."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.groups.log import OFFSETS_TOPIC, offsets_topic_configs
from pydmq.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


def test_the_configs_follow_the_broker_config() -> None:
    config = BrokerConfig({"offsets.topic.segment.bytes": 1048576})
    assert offsets_topic_configs(config) == {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "1048576",
    }
    assert offsets_topic_configs(BrokerConfig())["segment.bytes"] == "104857600"


def test_a_segment_size_kafka_4_refuses_for_topics_is_refused_at_start() -> None:
    with pytest.raises(ConfigError, match=r"offsets\.topic\.segment\.bytes"):
        BrokerConfig({"offsets.topic.segment.bytes": 1000})


def test_a_single_node_creates_the_topic_with_them(tmp_path: Path) -> None:
    overrides = {"offsets.topic.num.partitions": 2, "offsets.topic.segment.bytes": 2097152}
    with EmbeddedBroker(tmp_path, overrides=overrides) as b:
        b.broker.group_coordinator_log.ensure_created()
        topic = b.broker.topics.get(OFFSETS_TOPIC)
        assert topic is not None and len(topic.partitions) == 2
        assert dict(topic.configs) == offsets_topic_configs(b.broker.config)
        assert b.broker.topic_config(OFFSETS_TOPIC).get("segment.bytes") == 2097152
