"""Broker properties (Kafka names) and the loader for properties/TOML files and overrides."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from pydmq.config.definitions import (
    ConfigDef,
    ConfigError,
    ConfigType,
    ConfigValues,
    at_least,
    list_of,
    one_of,
)

__all__ = ["BROKER_CONFIGS", "BrokerConfig", "load_properties"]

_DAY_MS = 24 * 3600 * 1000
T = ConfigType

BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", T.INT, 1, "The node id of this server.", at_least(0), read_only=True),
    ConfigDef("broker.id", T.INT, -1, "Alias of node.id kept for old tools.", read_only=True),
    ConfigDef("process.roles", T.LIST, ["broker", "controller"], "Roles of this node.",
              list_of("broker", "controller"), read_only=True),
    ConfigDef("listeners", T.LIST, ["PLAINTEXT://127.0.0.1:9092"],
              "Comma-separated listener URIs the server binds.", read_only=True),
    ConfigDef("advertised.listeners", T.LIST, None,
              "Listeners published to clients; defaults to listeners.", read_only=True),
    ConfigDef("listener.security.protocol.map", T.LIST, ["PLAINTEXT:PLAINTEXT"],
              "Listener name to security protocol.", read_only=True),
    ConfigDef("controller.quorum.voters", T.LIST, [], "id@host:port of the controller voters.",
              read_only=True),
    ConfigDef("broker.rack", T.STRING, None, "Rack of this broker.", read_only=True),
    ConfigDef("log.dirs", T.LIST, ["./pydmq-data"], "Data directories.", read_only=True),
    ConfigDef("log.dir", T.STRING, None, "Single data directory (log.dirs wins).", read_only=True),
    ConfigDef("log.engine", T.STRING, "segment", "Default storage engine for new logs (pydmq)."),
    ConfigDef("num.partitions", T.INT, 1, "Default partition count for new topics.", at_least(1)),
    ConfigDef("default.replication.factor", T.INT, 1, "Default replication factor.", at_least(1)),
    ConfigDef("min.insync.replicas", T.INT, 1, "Minimum ISR size for acks=all.", at_least(1)),
    ConfigDef("auto.create.topics.enable", T.BOOLEAN, True, "Create topics on Metadata requests."),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics."),
    ConfigDef("message.max.bytes", T.INT, 1048588, "Largest record batch size allowed.",
              at_least(0)),
    ConfigDef("socket.request.max.bytes", T.INT, 104857600, "Largest request size.",
              at_least(1), read_only=True),
    ConfigDef("socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF (-1 = OS default).",
              read_only=True),
    ConfigDef("socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF (-1 = OS default).",
              read_only=True),
    ConfigDef("connections.max.idle.ms", T.LONG, 600000, "Idle connections are closed after this.",
              read_only=True),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, "Segment file size.", at_least(14)),
    ConfigDef("log.roll.ms", T.LONG, None, "Roll segments after this time (wins over hours)."),
    ConfigDef("log.roll.hours", T.INT, 168, "Roll segments after this many hours.", at_least(1)),
    ConfigDef("log.retention.ms", T.LONG, None, "Retention time (wins over minutes/hours)."),
    ConfigDef("log.retention.minutes", T.INT, None, "Retention time in minutes."),
    ConfigDef("log.retention.hours", T.INT, 168, "Retention time in hours."),
    ConfigDef("log.retention.bytes", T.LONG, -1, "Retention size per partition (-1 unlimited)."),
    ConfigDef("log.retention.check.interval.ms", T.LONG, 300000, "How often retention runs.",
              at_least(1)),
    ConfigDef("log.index.interval.bytes", T.INT, 4096, "Bytes between offset-index entries.",
              at_least(0)),
    ConfigDef("log.index.size.max.bytes", T.INT, 10485760, "Max index size per segment.",
              at_least(4)),
    ConfigDef("log.flush.interval.messages", T.LONG, 2**63 - 1, "fsync after this many batches.",
              at_least(1)),
    ConfigDef("log.flush.interval.ms", T.LONG, None, "fsync after this many ms."),
    ConfigDef("log.flush.scheduler.interval.ms", T.LONG, 2**63 - 1, "Flush scheduler period."),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment goes."),
    ConfigDef("log.cleanup.policy", T.LIST, ["delete"], "delete and/or compact.",
              list_of("delete", "compact")),
    ConfigDef("log.message.timestamp.type", T.STRING, "CreateTime", "CreateTime or LogAppendTime.",
              one_of("CreateTime", "LogAppendTime")),
    ConfigDef("log.message.timestamp.before.max.ms", T.LONG, 2**63 - 1,
              "How far a record timestamp may be in the past."),
    ConfigDef("log.message.timestamp.after.max.ms", T.LONG, 3600000,
              "How far a record timestamp may be in the future."),
    ConfigDef("compression.type", T.STRING, "producer", "Final compression of topic data.",
              one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, "Allow unclean elections."),
    ConfigDef("producer.id.expiration.ms", T.INT, _DAY_MS, "Idle producer state expiry.",
              at_least(1)),
    ConfigDef("transactional.id.expiration.ms", T.INT, 7 * _DAY_MS, "Idle transactional id expiry."),
    ConfigDef("transaction.max.timeout.ms", T.INT, 900000, "Largest transaction timeout."),
    ConfigDef("fetch.max.bytes", T.INT, 57671680, "Largest fetch response.", at_least(0)),
    ConfigDef("max.incremental.fetch.session.cache.slots", T.INT, 1000,
              "Fetch sessions kept.", at_least(0)),
    ConfigDef("offsets.topic.num.partitions", T.INT, 50, "Partitions of __consumer_offsets.",
              at_least(1), read_only=True),
    ConfigDef("offsets.topic.replication.factor", T.SHORT, 1, "RF of __consumer_offsets.",
              at_least(1), read_only=True),
    ConfigDef("offsets.retention.minutes", T.INT, 10080, "Committed offsets retention.",
              at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", T.INT, 3000, "Delay of a group's first rebalance."),
    ConfigDef("group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout."),
    ConfigDef("group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout."),
    ConfigDef("group.max.size", T.INT, 2**31 - 1, "Members per group.", at_least(1)),
    ConfigDef("group.consumer.heartbeat.interval.ms", T.INT, 5000,
              "Heartbeat interval given to consumer-protocol (KIP-848) members.", at_least(1)),
    ConfigDef("group.consumer.session.timeout.ms", T.INT, 45000,
              "Session timeout of consumer-protocol members.", at_least(1)),
    ConfigDef("group.consumer.max.size", T.INT, 2**31 - 1,
              "Members per consumer-protocol group.", at_least(1)),
    ConfigDef("group.consumer.assignors", T.LIST, ["uniform", "range"],
              "Server-side assignors by name; the first is the default."),
    ConfigDef("offsets.retention.check.interval.ms", T.LONG, 600000,
              "How often expired committed offsets are removed.", at_least(1)),
    ConfigDef("offset.metadata.max.bytes", T.INT, 4096,
              "Largest metadata string of a committed offset."),
)

TOPIC_DEFAULT_SOURCES: dict[str, str] = {
    # topic config -> broker config that supplies its default
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "pydmq.engine": "log.engine",
}


class BrokerConfig(ConfigValues):
    """The broker's static configuration plus dynamic broker-level overrides."""

    def __init__(self, explicit: Mapping[str, object] | None = None) -> None:
        super().__init__(BROKER_CONFIGS, explicit or {})

    @property
    def node_id(self) -> int:
        return self.get_int("node.id")

    @property
    def log_dir(self) -> Path:
        dirs = self.get_list("log.dirs") if self.is_explicit("log.dirs") else []
        if not dirs and self.get("log.dir"):
            dirs = [self.get_str("log.dir")]
        return Path((dirs or self.get_list("log.dirs"))[0])

    @property
    def listeners(self) -> list[str]:
        return self.get_list("listeners")

    @property
    def advertised_listeners(self) -> list[str]:
        advertised = self.get("advertised.listeners")
        return list(advertised) if isinstance(advertised, list) and advertised else self.listeners

    def retention_ms(self) -> int:
        for name, factor in (("log.retention.ms", 1), ("log.retention.minutes", 60000)):
            value = self.get(name)
            if value is not None:
                assert isinstance(value, int)
                return value * factor if value >= 0 else -1
        return self.get_int("log.retention.hours") * 3600000

    def roll_ms(self) -> int:
        value = self.get("log.roll.ms")
        if value is not None:
            assert isinstance(value, int)
            return value
        return self.get_int("log.roll.hours") * 3600000

    def flush_ms(self) -> int:
        value = self.get("log.flush.interval.ms")
        if value is None:
            return self.get_int("log.flush.scheduler.interval.ms")
        assert isinstance(value, int)
        return value

    def topic_default(self, topic_config: str) -> object:
        """The broker-derived default of a topic config (Kafka's DEFAULT or STATIC source)."""
        match topic_config:
            case "retention.ms":
                return self.retention_ms()
            case "segment.ms":
                return self.roll_ms()
            case "flush.ms":
                return self.flush_ms()
        source = TOPIC_DEFAULT_SOURCES.get(topic_config)
        return None if source is None else self.get(source)


def load_properties(path: Path) -> dict[str, object]:
    """Read a Kafka ``.properties`` file or a TOML file (flat keys or nested tables)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        flat: dict[str, object] = {}

        def walk(prefix: str, table: Mapping[str, object]) -> None:
            for key, value in table.items():
                name = f"{prefix}.{key}" if prefix else key
                if isinstance(value, dict):
                    walk(name, value)
                else:
                    flat[name] = value

        walk("", tomllib.loads(text))
        return flat
    values: dict[str, object] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        for separator in ("=", ":"):
            if separator in stripped:
                key, value = stripped.split(separator, 1)
                values[key.strip()] = value.strip()
                break
        else:
            raise ConfigError(f"{path}:{number}: expected key=value, got {stripped!r}")
    return values
