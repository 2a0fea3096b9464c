"""The compaction configs: Kafka 4's segment.bytes minimum with the internal override, the
topic knobs reaching LogConfig, and the log.cleaner.* broker configs the cleaner honours."""

from __future__ import annotations

import pytest

from pydmq.config.broker import BROKER_CONFIGS, BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.config.kafka_only import kafka_only_reason
from pydmq.config.topic import TOPIC_DEFAULT_SYNONYMS, TopicConfig, validate_topic_configs


def test_segment_bytes_under_one_mib_is_refused_as_kafka_4_does() -> None:
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        validate_topic_configs({"segment.bytes": "1048575"})
    assert validate_topic_configs({"segment.bytes": "1048576"}) == {"segment.bytes": 1048576}


def test_internal_segment_bytes_overrides_and_is_never_described() -> None:
    configs = {"internal.segment.bytes": "4096", "cleanup.policy": "compact"}
    topic = TopicConfig(BrokerConfig({}), validate_topic_configs(configs))
    assert topic.log_config().segment_bytes == 4096
    assert "internal.segment.bytes" not in {d.name for d in TopicConfig.definitions()}


def test_the_topic_knobs_reach_the_log_config() -> None:
    explicit = {
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.25",
        "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "60000",
        "delete.retention.ms": "7",
    }
    config = TopicConfig(BrokerConfig({}), validate_topic_configs(explicit)).log_config()
    assert (config.compact, config.delete) == (True, True)
    assert config.min_cleanable_dirty_ratio == 0.25
    assert (config.min_compaction_lag_ms, config.max_compaction_lag_ms) == (5, 60000)
    assert config.delete_retention_ms == 7
    empty = TopicConfig(BrokerConfig({}), {"cleanup.policy": []}).log_config()
    assert (empty.compact, empty.delete) == (False, False)


def test_topic_defaults_come_from_the_log_cleaner_broker_configs() -> None:
    broker = BrokerConfig(
        {"log.cleaner.delete.retention.ms": "11", "log.cleaner.min.cleanable.ratio": "0.1"}
    )
    config = TopicConfig(broker, {}).log_config()
    assert config.delete_retention_ms == 11 and config.min_cleanable_dirty_ratio == 0.1
    assert TOPIC_DEFAULT_SYNONYMS["min.compaction.lag.ms"] == ("log.cleaner.min.compaction.lag.ms",)


def test_the_honoured_log_cleaner_configs_are_pydmq_configs() -> None:
    defined = {d.name: d for d in BROKER_CONFIGS}
    for name in (
        "log.cleaner.enable",
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
    ):
        assert name in defined and kafka_only_reason(name) is None
    assert kafka_only_reason("log.cleaner.io.buffer.size") is not None
    rate = defined["log.cleaner.io.max.bytes.per.second"]
    assert rate.render(BrokerConfig({}).get(rate.name)) == "1.7976931348623157E308"
    settings = BrokerConfig({"log.cleaner.threads": "3", "log.cleaner.backoff.ms": "5"})
    assert settings.cleaner_settings().threads == 3
    assert settings.cleaner_settings().backoff_ms == 5
    assert settings.cleaner_settings().dedupe_buffer_per_thread == 134217728 // 3
