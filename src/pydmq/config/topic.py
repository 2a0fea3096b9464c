"""Topic-level configs (Kafka names): definitions, validation and effective values."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydmq.config.broker import TOPIC_DEFAULT_SOURCES, BrokerConfig
from pydmq.config.definitions import ConfigDef, ConfigError, ConfigType, at_least, list_of, one_of
from pydmq.storage.api import LogConfig

__all__ = [
    "INTERNAL_TOPIC_CONFIGS",
    "TOPIC_CONFIGS",
    "TOPIC_DEFAULT_SYNONYMS",
    "TopicConfig",
    "broker_synonyms",
    "validate_topic_configs",
]

T = ConfigType
_INF = 2**63 - 1
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def _strategy_name(value: object) -> str | None:
    # Any registered strategy may be named (plugins add them), so only the shape is checked here.
    return None if _NAME.match(str(value)) else "must be a strategy name such as isr or quorum"


TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "cleanup.policy",
        T.LIST,
        ["delete"],
        "delete and/or compact; empty: neither (Kafka 4).",
        list_of("delete", "compact", allow_empty=True),
    ),
    ConfigDef(
        "compression.type",
        T.STRING,
        "producer",
        "Final compression of this topic.",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("delete.retention.ms", T.LONG, 86400000, "Tombstone retention.", at_least(0)),
    ConfigDef("file.delete.delay.ms", T.LONG, 60000, "Delay before deleting a file.", at_least(0)),
    ConfigDef("flush.messages", T.LONG, _INF, "fsync after this many batches.", at_least(1)),
    ConfigDef("flush.ms", T.LONG, _INF, "fsync after this many ms.", at_least(0)),
    ConfigDef("index.interval.bytes", T.INT, 4096, "Bytes between index entries.", at_least(0)),
    ConfigDef("max.compaction.lag.ms", T.LONG, _INF, "Max time before compaction.", at_least(1)),
    ConfigDef("max.message.bytes", T.INT, 1048588, "Largest record batch.", at_least(0)),
    ConfigDef(
        "message.timestamp.type",
        T.STRING,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of("CreateTime", "LogAppendTime"),
    ),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, _INF, "Max past skew.", at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, 3600000, "Max future skew.", at_least(0)),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, 0.5, "Compaction trigger ratio."),
    ConfigDef("min.compaction.lag.ms", T.LONG, 0, "Min time before compaction.", at_least(0)),
    ConfigDef("min.insync.replicas", T.INT, 1, "Min ISR for acks=all.", at_least(1)),
    ConfigDef("preallocate", T.BOOLEAN, False, "Preallocate segment files."),
    ConfigDef("retention.bytes", T.LONG, -1, "Size retention (-1 unlimited)."),
    ConfigDef("retention.ms", T.LONG, 604800000, "Time retention (-1 unlimited).", at_least(-1)),
    # Kafka 4 refuses segments under 1 MiB (KIP-1030); tests use internal.segment.bytes.
    ConfigDef("segment.bytes", T.INT, 1073741824, "Segment size.", at_least(1024 * 1024)),
    ConfigDef("segment.index.bytes", T.INT, 10485760, "Index size.", at_least(4)),
    ConfigDef("segment.jitter.ms", T.LONG, 0, "Random roll jitter.", at_least(0)),
    ConfigDef("segment.ms", T.LONG, 604800000, "Roll after this time.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, "Allow unclean elections."),
    ConfigDef("pydmq.engine", T.STRING, "segment", "Storage engine of this topic (pydmq)."),
    ConfigDef(
        "pydmq.replication.strategy",
        T.STRING,
        "isr",
        "Replication strategy of this topic by registered name: isr or quorum (pydmq).",
        _strategy_name,
    ),
)

# Accepted at creation and by AlterConfigs, never described (Kafka's LogConfig internal
# configs): a segment size below segment.bytes's minimum, for tests (Kafka's own tests too).
INTERNAL_TOPIC_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "internal.segment.bytes",
        T.INT,
        None,
        "Segment size overriding segment.bytes, without its 1 MiB minimum (tests).",
        at_least(14),
    ),
)

_BY_NAME = {d.name: d for d in (*TOPIC_CONFIGS, *INTERNAL_TOPIC_CONFIGS)}

# topic config -> the broker configs its default comes from, in Kafka's precedence order
# (the first one set wins; e.g. log.retention.ms over .minutes over .hours).
TOPIC_DEFAULT_SYNONYMS: dict[str, tuple[str, ...]] = {
    **{name: (source,) for name, source in TOPIC_DEFAULT_SOURCES.items()},
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
}


def broker_synonyms(broker_config: str) -> tuple[str, ...]:
    """A broker config and the lower-precedence configs that stand in for it (Kafka order)."""
    for synonyms in TOPIC_DEFAULT_SYNONYMS.values():
        if broker_config in synonyms:
            return synonyms[synonyms.index(broker_config) :]
    return (broker_config,)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, object]:
    """Parse and validate explicit topic configs; raises ConfigError (INVALID_CONFIG)."""
    parsed: dict[str, object] = {}
    for name, raw in configs.items():
        definition = _BY_NAME.get(name)
        if definition is None:
            raise ConfigError(f"unknown topic config {name!r}")
        if raw is None:
            raise ConfigError(f"null value for topic config {name!r}")
        parsed[name] = definition.parse(raw)
    return parsed


class TopicConfig:
    """Effective configs of one topic: explicit topic values over broker-derived defaults."""

    def __init__(self, broker: BrokerConfig, explicit: Mapping[str, object]) -> None:
        self._broker = broker
        # Explicit values arrive as the strings clients sent (the registry keeps them so);
        # parse them once so that get_int/get_bool see typed values.
        self.explicit: dict[str, object] = {
            name: _BY_NAME[name].parse(raw) if name in _BY_NAME else raw
            for name, raw in explicit.items()
        }

    @staticmethod
    def definitions() -> tuple[ConfigDef, ...]:
        return TOPIC_CONFIGS

    def source_of(self, name: str) -> str:
        """DYNAMIC_TOPIC_CONFIG, then the first broker synonym's source: a dynamic broker
        config (this node's, then the cluster default), STATIC_BROKER_CONFIG; else
        DEFAULT_CONFIG."""
        if name in self.explicit:
            return "DYNAMIC_TOPIC_CONFIG"
        synonyms = TOPIC_DEFAULT_SYNONYMS.get(name, ())
        for layer in ("DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"):
            if any(self._broker.dynamic_source(source) == layer for source in synonyms):
                return layer
        for source in synonyms:
            if self._broker.is_explicit(source):
                return "STATIC_BROKER_CONFIG"
        return "DEFAULT_CONFIG"

    def get(self, name: str) -> object:
        if name in self.explicit:
            return self.explicit[name]
        value = self._broker.topic_default(name)
        return _BY_NAME[name].default if value is None else value

    def get_int(self, name: str) -> int:
        value = self.get(name)
        assert isinstance(value, int), name
        return value

    def get_str(self, name: str) -> str:
        return str(self.get(name))

    def _segment_bytes(self) -> int:
        internal = self.explicit.get("internal.segment.bytes")
        return internal if isinstance(internal, int) else self.get_int("segment.bytes")

    def cleanup_policy(self) -> list[str]:
        value = self.get("cleanup.policy")
        assert isinstance(value, list), value
        return [str(v) for v in value]

    def log_config(self) -> LogConfig:
        policy = self.cleanup_policy()
        ratio = self.get("min.cleanable.dirty.ratio")
        assert isinstance(ratio, float | int), ratio
        return LogConfig(
            delete="delete" in policy,
            compact="compact" in policy,
            min_cleanable_dirty_ratio=float(ratio),
            min_compaction_lag_ms=self.get_int("min.compaction.lag.ms"),
            max_compaction_lag_ms=self.get_int("max.compaction.lag.ms"),
            delete_retention_ms=self.get_int("delete.retention.ms"),
            segment_bytes=self._segment_bytes(),
            segment_ms=self.get_int("segment.ms"),
            segment_index_bytes=self.get_int("segment.index.bytes"),
            index_interval_bytes=self.get_int("index.interval.bytes"),
            retention_ms=self.get_int("retention.ms"),
            retention_bytes=self.get_int("retention.bytes"),
            flush_messages=self.get_int("flush.messages"),
            flush_ms=self.get_int("flush.ms"),
            file_delete_delay_ms=self.get_int("file.delete.delay.ms"),
        )


def check_known(name: str) -> ConfigDef:
    definition = _BY_NAME.get(name)
    if definition is None:
        raise ConfigError(f"unknown topic config {name!r}")
    return definition
