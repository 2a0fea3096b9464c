"""``__transaction_state`` is created with Kafka's transaction-log configs: compacted,
``transaction.state.log.segment.bytes`` segments, ``transaction.state.log.min.isr`` capped at
the replication factor the topic gets, ``transaction.state.log.num.partitions`` partitions;
a transactional id's partition is Kafka's (``abs(hashCode) % partitions``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.testing import EmbeddedBroker
from pydmq.transactions.log import (
    TRANSACTION_STATE_TOPIC,
    transaction_state_topic_configs,
    transactional_id_partition,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)

TOPIC = 2


def test_the_configs_follow_the_broker_config() -> None:
    config = BrokerConfig(
        {"transaction.state.log.segment.bytes": 1048576, "transaction.state.log.min.isr": 2}
    )
    assert transaction_state_topic_configs(config, 3) == {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": "2",
        "segment.bytes": "1048576",
        "unclean.leader.election.enable": "false",
    }
    assert transaction_state_topic_configs(config, 1)["min.insync.replicas"] == "1"
    with pytest.raises(ConfigError, match=r"transaction\.state\.log\.segment\.bytes"):
        BrokerConfig({"transaction.state.log.segment.bytes": 1000})


def test_partition_of_a_transactional_id_is_kafkas() -> None:
    # String.hashCode: "txn" = 115306, "" = 0; Integer.MIN_VALUE maps to 0 as Utils.abs
    assert transactional_id_partition("txn", 50) == 115306 % 50
    assert transactional_id_partition("", 50) == 0
    assert transactional_id_partition("polygenelubricants", 50) == 0  # hashCode MIN_VALUE


def test_a_single_node_creates_the_topic_on_find_coordinator(tmp_path: Path) -> None:
    overrides = {"transaction.state.log.num.partitions": 3}
    with EmbeddedBroker(tmp_path, overrides=overrides) as b, RawClient(b.bootstrap) as raw:
        request = MetadataRequest(topics=[MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC)])
        assert raw.request(3, 9, request).body.topics[0].error_code != 0  # not yet
        found = raw.request(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]))
        assert found.body.coordinators[0].error_code == 0
        [topic] = raw.request(3, 9, request).body.topics
        assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 3
        described = raw.request(
            32,
            4,
            DescribeConfigsRequest(
                resources=[
                    DescribeConfigsResource(
                        resource_type=TOPIC,
                        resource_name=TRANSACTION_STATE_TOPIC,
                        configuration_keys=["cleanup.policy", "min.insync.replicas"],
                    )
                ]
            ),
        ).body
        values = {c.name: c.value for c in described.results[0].configs}
        assert values == {"cleanup.policy": "compact", "min.insync.replicas": "1"}
