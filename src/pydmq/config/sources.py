"""Kafka's ConfigSource codes: where a config's effective value comes from, on the wire.

:meth:`pydmq.config.topic.TopicConfig.source_of` and the broker config layers name a source;
CreateTopics and DescribeConfigs answers carry its code.
"""

from __future__ import annotations

__all__ = ["CONFIG_SOURCES"]

CONFIG_SOURCES = {
    "UNKNOWN": 0,
    "DYNAMIC_TOPIC_CONFIG": 1,
    "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    "STATIC_BROKER_CONFIG": 4,
    "DEFAULT_CONFIG": 5,
    "DYNAMIC_GROUP_CONFIG": 8,
}
