"""Configuration with Kafka's property names."""

from pydmq.config.broker import BrokerConfig, load_properties
from pydmq.config.definitions import ConfigDef, ConfigError, ConfigType
from pydmq.config.topic import TopicConfig

__all__ = [
    "BrokerConfig",
    "ConfigDef",
    "ConfigError",
    "ConfigType",
    "TopicConfig",
    "load_properties",
]
