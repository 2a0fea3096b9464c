"""Broker properties (Kafka names) and the loader for properties/TOML files and overrides."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydmq.cleaner.config import CleanerSettings
from pydmq.config.authorizer import AUTHORIZER_CONFIGS
from pydmq.config.definitions import (
    ConfigDef,
    ConfigError,
    ConfigType,
    ConfigValues,
    at_least,
    list_of,
    one_of,
    parse_value,
)
from pydmq.config.features import FEATURE_CONFIGS
from pydmq.config.http import HTTP_CONFIGS
from pydmq.config.kafka_only import kafka_only_reason, unknown_property_message
from pydmq.config.listener_security import check_listener_security, security_protocol
from pydmq.config.quotas import QUOTA_CONFIGS, pop_listener_limits
from pydmq.config.sasl_configs import SASL_CONFIGS, pop_listener_sasl
from pydmq.config.share import SHARE_CONFIGS
from pydmq.config.ssl_configs import SSL_CONFIGS, pop_listener_ssl

__all__ = [
    "BROKER_CONFIGS",
    "DEFAULT_CONTROL_PLANE_LISTENER",
    "BrokerConfig",
    "load_properties",
    "parse_quorum_voters",
]

_DAY_MS = 24 * 3600 * 1000
# The control-plane listener's name when control.plane.listener.name is not set.
DEFAULT_CONTROL_PLANE_LISTENER = "CONTROL_PLANE"
T = ConfigType
_LISTENER_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_quorum_voters(entries: Iterable[str]) -> dict[int, tuple[str, int]]:
    """``["1@host:9093", "2@[::1]:9093"]`` -> ``{1: ("host", 9093), 2: ("::1", 9093)}``.

    Raises ConfigError on a malformed entry, a port outside 1-65535 or a duplicate id.
    """
    voters: dict[int, tuple[str, int]] = {}
    for raw in entries:
        entry = raw.strip()
        if not entry:
            continue
        node, sep, address = entry.partition("@")
        if address.startswith("["):
            host, bracket, rest = address[1:].partition("]")
            colon, port = rest[:1], rest[1:]
            ok = bool(bracket) and colon == ":"
        else:
            host, colon, port = address.rpartition(":")
            ok = bool(colon) and ":" not in host
        node = node.strip()
        if not (sep and ok and host and node.isdigit() and port.isdigit()):
            raise ConfigError(f"controller.quorum.voters entry {entry!r} is not id@host:port")
        node_id, port_number = int(node), int(port)
        if not 0 < port_number < 65536:
            raise ConfigError(f"controller.quorum.voters entry {entry!r}: bad port")
        if node_id in voters:
            raise ConfigError(f"controller.quorum.voters names node {node_id} twice")
        voters[node_id] = (host, port_number)
    return voters


def _share(value: object) -> str | None:
    assert isinstance(value, float)
    return None if 0.0 < value <= 1.0 else "must be above 0 and at most 1"


def _valid_voters(value: object) -> str | None:
    assert isinstance(value, list)
    try:
        parse_quorum_voters(value)
    except ConfigError as exc:
        return str(exc)
    return None


def _listener_name(value: object) -> str | None:
    return None if _LISTENER_NAME.match(str(value)) else "not a listener name"


def _non_empty_names(value: object) -> str | None:
    assert isinstance(value, list)
    if not value:
        return "must name at least one listener"
    bad = [v for v in value if not _LISTENER_NAME.match(v)]
    return f"not listener names: {', '.join(bad)}" if bad else None


BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", T.INT, 1, "The node id of this server.", at_least(0), read_only=True),
    ConfigDef("broker.id", T.INT, -1, "Alias of node.id kept for old tools.", read_only=True),
    ConfigDef(
        "cluster.id",
        T.STRING,
        "",
        "Cluster id written to meta.properties on first start (Kafka sets it with "
        "kafka-storage format). Empty: derived from controller.quorum.voters in cluster "
        "mode, so every node of one quorum agrees; random on a single node.",
        read_only=True,
    ),
    ConfigDef(
        "process.roles",
        T.LIST,
        ["broker", "controller"],
        "Roles of this node.",
        list_of("broker", "controller"),
        read_only=True,
    ),
    ConfigDef(
        "listeners",
        T.LIST,
        ["PLAINTEXT://127.0.0.1:9092"],
        "Comma-separated listener URIs the server binds.",
        read_only=True,
    ),
    ConfigDef(
        "advertised.listeners",
        T.LIST,
        None,
        "Listeners published to clients; defaults to listeners.",
        read_only=True,
    ),
    ConfigDef(
        "listener.security.protocol.map",
        T.LIST,
        ["PLAINTEXT:PLAINTEXT"],
        "Listener name to security protocol.",
        read_only=True,
    ),
    ConfigDef(
        "controller.quorum.voters",
        T.LIST,
        [],
        "id@host:port of the controller voters; empty = single-node mode.",
        _valid_voters,
        read_only=True,
    ),
    ConfigDef(
        "controller.listener.names",
        T.LIST,
        ["CONTROLLER"],
        "Listeners that serve the controller APIs only.",
        _non_empty_names,
        read_only=True,
    ),
    ConfigDef(
        "inter.broker.listener.name",
        T.STRING,
        "PLAINTEXT",
        "Listener brokers use to reach each other.",
        _listener_name,
        read_only=True,
    ),
    ConfigDef(
        "control.plane.listener.name",
        T.STRING,
        None,
        "Listener on which a broker accepts the controller's requests (LeaderAndIsr, "
        "StopReplica, UpdateMetadata; KIP-291); no other listener serves them. Unset in "
        "cluster mode: a CONTROL_PLANE listener (from listeners, else opened on the "
        "inter-broker listener's host at an ephemeral port).",
        _listener_name,
        read_only=True,
    ),
    ConfigDef("broker.rack", T.STRING, None, "Rack of this broker.", read_only=True),
    ConfigDef(
        "broker.session.timeout.ms",
        T.INT,
        9000,
        "The controller fences a broker after this long without a heartbeat.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "broker.heartbeat.interval.ms",
        T.INT,
        2000,
        "Broker heartbeat period.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "controller.quorum.election.timeout.ms",
        T.INT,
        1000,
        "Election timeout, randomised in [t, 2t).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "controller.quorum.fetch.timeout.ms",
        T.INT,
        2000,
        "A follower without leader contact for this long starts an election.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "controller.quorum.election.backoff.max.ms",
        T.INT,
        1000,
        "Largest backoff before a new election.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "metadata.log.max.snapshot.interval.records",
        T.LONG,
        10000,
        "Snapshot the metadata log after this many records (pydmq).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "replica.lag.time.max.ms",
        T.LONG,
        30000,
        "A follower behind for this long leaves the ISR.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "replica.fetch.wait.max.ms",
        T.INT,
        500,
        "Follower fetch long-poll.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "replica.fetch.max.bytes",
        T.INT,
        1048576,
        "Bytes a follower fetches per partition.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef("log.dirs", T.LIST, ["./pydmq-data"], "Data directories.", read_only=True),
    ConfigDef("log.dir", T.STRING, None, "Single data directory (log.dirs wins).", read_only=True),
    ConfigDef("log.engine", T.STRING, "segment", "Default storage engine for new logs (pydmq)."),
    ConfigDef(
        "pydmq.replica.placer",
        T.STRING,
        "striped",
        "Replica placer (pydmq_register_replica_placers) the controller uses for new "
        "partitions (pydmq).",
        read_only=True,
    ),
    ConfigDef(
        "pydmq.max.broker.partitions",
        T.INT,
        50000,
        "Partition replicas one node may host, those it hosts already included (KIP-578's "
        "max.broker.partitions). CreateTopics, CreatePartitions and auto-creation beyond it get "
        "POLICY_VIOLATION; in cluster mode the active controller applies its own value to every "
        "broker (pydmq).",
        at_least(1),
    ),
    ConfigDef(
        "pydmq.auto.create.max.partitions",
        T.INT,
        1000,
        "Partitions one Metadata request may auto-create; the topics beyond them are answered "
        "LEADER_NOT_AVAILABLE (retriable) and created by the client's next request (pydmq).",
        at_least(1),
    ),
    ConfigDef(
        "pydmq.log.open.files.share",
        T.DOUBLE,
        0.5,
        "Share of the soft RLIMIT_NOFILE the storage engines may hold open (segment files and "
        "their maps; the least recently used are closed beyond it); the rest is left to "
        "connections, indexes and sockets (pydmq).",
        _share,
        read_only=True,
    ),
    ConfigDef(
        "num.partitions",
        T.INT,
        1,
        "Default partition count for new topics.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "default.replication.factor",
        T.INT,
        1,
        "Default replication factor.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef("min.insync.replicas", T.INT, 1, "Minimum ISR size for acks=all.", at_least(1)),
    ConfigDef(
        "auto.create.topics.enable",
        T.BOOLEAN,
        True,
        "Create topics on Metadata requests.",
        read_only=True,
    ),
    ConfigDef("delete.topic.enable", T.BOOLEAN, True, "Allow DeleteTopics.", read_only=True),
    ConfigDef(
        "message.max.bytes", T.INT, 1048588, "Largest record batch size allowed.", at_least(0)
    ),
    ConfigDef(
        "socket.request.max.bytes",
        T.INT,
        104857600,
        "Largest request size.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "socket.send.buffer.bytes", T.INT, 102400, "SO_SNDBUF (-1 = OS default).", read_only=True
    ),
    ConfigDef(
        "socket.receive.buffer.bytes", T.INT, 102400, "SO_RCVBUF (-1 = OS default).", read_only=True
    ),
    ConfigDef(
        "connections.max.idle.ms",
        T.LONG,
        600000,
        "Idle connections are closed after this.",
        read_only=True,
    ),
    ConfigDef("log.segment.bytes", T.INT, 1073741824, "Segment file size.", at_least(14)),
    ConfigDef("log.roll.ms", T.LONG, None, "Roll segments after this time (wins over hours)."),
    ConfigDef(
        "log.roll.hours",
        T.INT,
        168,
        "Roll segments after this many hours.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef("log.retention.ms", T.LONG, None, "Retention time (wins over minutes/hours)."),
    ConfigDef("log.retention.minutes", T.INT, None, "Retention time in minutes.", read_only=True),
    ConfigDef("log.retention.hours", T.INT, 168, "Retention time in hours.", read_only=True),
    ConfigDef("log.retention.bytes", T.LONG, -1, "Retention size per partition (-1 unlimited)."),
    ConfigDef(
        "log.retention.check.interval.ms",
        T.LONG,
        300000,
        "How often retention runs.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "log.index.interval.bytes", T.INT, 4096, "Bytes between offset-index entries.", at_least(0)
    ),
    ConfigDef(
        "log.index.size.max.bytes", T.INT, 10485760, "Max index size per segment.", at_least(4)
    ),
    ConfigDef(
        "log.flush.interval.messages",
        T.LONG,
        2**63 - 1,
        "fsync after this many batches.",
        at_least(1),
    ),
    ConfigDef("log.flush.interval.ms", T.LONG, None, "fsync after this many ms."),
    ConfigDef(
        "log.flush.scheduler.interval.ms",
        T.LONG,
        2**63 - 1,
        "Flush scheduler period.",
        read_only=True,
    ),
    ConfigDef("log.segment.delete.delay.ms", T.LONG, 60000, "Delay before a deleted segment goes."),
    ConfigDef("log.cleaner.enable", T.BOOLEAN, True, "Run the log cleaner.", read_only=True),
    ConfigDef("log.cleaner.threads", T.INT, 1, "Log cleaner threads.", at_least(0)),
    ConfigDef(
        "log.cleaner.dedupe.buffer.size",
        T.LONG,
        134217728,
        "Offset map memory of all cleaner threads.",
        at_least(0),
    ),
    ConfigDef(
        "log.cleaner.io.max.bytes.per.second",
        T.DOUBLE,
        1.7976931348623157e308,
        "Cleaner I/O throttle (read plus written).",
    ),
    ConfigDef("log.cleaner.backoff.ms", T.LONG, 15000, "Cleaner sleep when idle.", at_least(0)),
    ConfigDef(
        "log.cleaner.delete.retention.ms", T.LONG, 86400000, "Tombstone retention.", at_least(0)
    ),
    ConfigDef(
        "log.cleaner.min.cleanable.ratio", T.DOUBLE, 0.5, "Dirty ratio that triggers cleaning."
    ),
    ConfigDef(
        "log.cleaner.min.compaction.lag.ms", T.LONG, 0, "Min age before compaction.", at_least(0)
    ),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms",
        T.LONG,
        2**63 - 1,
        "Max age before compaction.",
        at_least(1),
    ),
    ConfigDef(
        "log.cleanup.policy",
        T.LIST,
        ["delete"],
        "delete and/or compact.",
        list_of("delete", "compact"),
    ),
    ConfigDef(
        "log.message.timestamp.type",
        T.STRING,
        "CreateTime",
        "CreateTime or LogAppendTime.",
        one_of("CreateTime", "LogAppendTime"),
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms",
        T.LONG,
        2**63 - 1,
        "How far a record timestamp may be in the past.",
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms",
        T.LONG,
        3600000,
        "How far a record timestamp may be in the future.",
    ),
    ConfigDef(
        "compression.type",
        T.STRING,
        "producer",
        "Final compression of topic data.",
        one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, False, "Allow unclean elections."),
    ConfigDef(
        "producer.id.expiration.ms", T.INT, _DAY_MS, "Idle producer state expiry.", at_least(1)
    ),
    ConfigDef(
        "transactional.id.expiration.ms",
        T.INT,
        7 * _DAY_MS,
        "Idle transactional id expiry.",
        read_only=True,
    ),
    ConfigDef(
        "transaction.partition.verification.enable",
        T.BOOLEAN,
        True,
        "Verify with the transaction coordinator that a partition is in the producer's "
        "transaction before appending the transaction's first batch to it (KIP-890).",
    ),
    ConfigDef(
        "transaction.max.timeout.ms",
        T.INT,
        900000,
        "Largest transaction timeout a producer may ask for.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "transaction.state.log.num.partitions",
        T.INT,
        50,
        "Partitions of __transaction_state.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "transaction.state.log.replication.factor",
        T.SHORT,
        3,
        "RF of __transaction_state, capped at the number of registered brokers.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "transaction.state.log.segment.bytes",
        T.INT,
        104857600,
        "Segment size of __transaction_state: small segments keep it compacted and load fast.",
        at_least(1024 * 1024),
        read_only=True,
    ),
    ConfigDef(
        "transaction.state.log.min.isr",
        T.INT,
        2,
        "min.insync.replicas of __transaction_state.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        T.INT,
        10000,
        "How often the transaction coordinator aborts transactions past their timeout.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        T.INT,
        3600000,
        "How often the transaction coordinator removes expired transactional ids.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "fetch.max.bytes", T.INT, 57671680, "Largest fetch response.", at_least(0), read_only=True
    ),
    ConfigDef(
        "max.incremental.fetch.session.cache.slots",
        T.INT,
        1000,
        "Fetch sessions kept.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "offsets.topic.num.partitions",
        T.INT,
        50,
        "Partitions of __consumer_offsets.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "offsets.topic.segment.bytes",
        T.INT,
        104857600,
        "Segment size of __consumer_offsets: small segments keep it compacted and its load fast.",
        at_least(1024 * 1024),
        read_only=True,
    ),
    ConfigDef(
        "offsets.topic.replication.factor",
        T.SHORT,
        3,
        "RF of __consumer_offsets, capped at the number of registered brokers.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "offsets.retention.minutes",
        T.INT,
        10080,
        "Committed offsets retention.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "group.initial.rebalance.delay.ms",
        T.INT,
        3000,
        "Delay of a group's first rebalance.",
        read_only=True,
    ),
    ConfigDef(
        "group.min.session.timeout.ms", T.INT, 6000, "Smallest session timeout.", read_only=True
    ),
    ConfigDef(
        "group.max.session.timeout.ms", T.INT, 1800000, "Largest session timeout.", read_only=True
    ),
    ConfigDef(
        "group.max.size", T.INT, 2**31 - 1, "Members per group.", at_least(1), read_only=True
    ),
    ConfigDef(
        "group.consumer.heartbeat.interval.ms",
        T.INT,
        5000,
        "Heartbeat interval given to consumer-protocol (KIP-848) members.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "group.consumer.session.timeout.ms",
        T.INT,
        45000,
        "Session timeout of consumer-protocol members.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "group.consumer.max.size",
        T.INT,
        2**31 - 1,
        "Members per consumer-protocol group.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "group.consumer.assignors",
        T.LIST,
        ["uniform", "range"],
        "Server-side assignors by name; the first is the default.",
        read_only=True,
    ),
    ConfigDef(
        "offsets.retention.check.interval.ms",
        T.LONG,
        600000,
        "How often expired committed offsets are removed.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "offset.metadata.max.bytes",
        T.INT,
        4096,
        "Largest metadata string of a committed offset.",
        read_only=True,
    ),
    *SSL_CONFIGS,
    *AUTHORIZER_CONFIGS,
    *HTTP_CONFIGS,
    *QUOTA_CONFIGS,
    *SASL_CONFIGS,
    *FEATURE_CONFIGS,
    *SHARE_CONFIGS,
)

_DEFINED = frozenset(d.name for d in BROKER_CONFIGS)

TOPIC_DEFAULT_SOURCES: dict[str, str] = {
    # topic config -> broker config that supplies its default
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
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
    """The broker's static configuration plus dynamic broker-level overrides.

    Accepts a Kafka ``server.properties`` as it is: the properties defined above are
    honoured (``broker.id`` as Kafka's synonym of ``node.id``), the Kafka properties of
    :mod:`pydmq.config.kafka_only` are kept aside in :attr:`without_effect` (name -> reason)
    for one start-up warning, and any other name is refused with the closest known one. A
    setting pydmq would silently get wrong is refused: a listener whose security protocol it
    does not serve, and a ``controller.quorum.bootstrap.servers`` (KIP-853) quorum other than
    this node alone (pydmq's quorum is ``controller.quorum.voters``).
    """

    def __init__(self, explicit: Mapping[str, object] | None = None) -> None:
        values = dict(explicit or {})
        self.listener_ssl = pop_listener_ssl(values)  # listener.name.<name>.ssl.*
        self.listener_sasl = pop_listener_sasl(values)  # listener.name.<name>.* of SASL
        self.listener_limits = pop_listener_limits(values)  # ...<name>.max.connection*
        self.without_effect: dict[str, str] = {}
        kafka_only: dict[str, object] = {}
        for name in [n for n in values if n not in _DEFINED]:
            reason = kafka_only_reason(name)
            if reason is not None:
                self.without_effect[name] = reason
                kafka_only[name] = values.pop(name)
        super().__init__(BROKER_CONFIGS, values)
        # The Kafka-only properties as written (DescribeConfigs: STATIC_BROKER_CONFIG).
        self.kafka_only_values: dict[str, str] = {
            name: str(value) for name, value in kafka_only.items()
        }
        # Dynamic broker configs (IncrementalAlterConfigs/AlterConfigs on a BROKER resource),
        # as given: the cluster-wide default ("" resource) and this node's own; the latter win.
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._dynamic_values: dict[str, object] = {}  # pydmq's own properties among them
        self._check_node_id_synonym()
        check_listener_security(self, [_listener_uri_name(uri) for uri in self.listeners])
        self._check_quorum_bootstrap(kafka_only.get("controller.quorum.bootstrap.servers"))

    def set(self, name: str, raw: object) -> None:
        if name not in self.definitions:
            raise ConfigError(unknown_property_message(name, self.definitions))
        super().set(name, raw)

    def get(self, name: str) -> object:
        """The effective value: this node's dynamic config, else the cluster-wide dynamic
        default, else the static configuration, else the default (Kafka's precedence)."""
        if name in self._dynamic_values:
            return self._dynamic_values[name]
        return super().get(name)

    def set_dynamic(self, cluster_default: Mapping[str, str], broker: Mapping[str, str]) -> None:
        """Replace both dynamic layers (raw values; pydmq's own properties among them must
        parse: ConfigError otherwise, and nothing changes)."""
        values: dict[str, object] = {}
        for layer in (cluster_default, broker):
            for name, raw in layer.items():
                definition = self.definitions.get(name)
                if definition is not None:
                    values[name] = definition.parse(raw)
        self.dynamic_default = dict(cluster_default)
        self.dynamic_broker = dict(broker)
        self._dynamic_values = values

    def static_value(self, name: str) -> object:
        """The value of pydmq's own property ``name`` without the dynamic layers: the static
        configuration, else the default."""
        return super().get(name)

    def static_configs(self) -> dict[str, str]:
        """The value of every property without the dynamic layers, as strings: pydmq's own
        (the static file, else the default; unset ones left out) and the Kafka-only ones the
        file sets. What a dynamic list property's APPEND/SUBTRACT starts from when no dynamic
        layer sets it."""
        out = dict(self.kafka_only_values)
        for name, definition in self.definitions.items():
            rendered = definition.render(self.static_value(name))
            if rendered is not None:
                out[name] = rendered
        return out

    def dynamic_source(self, name: str) -> str | None:
        """DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG when ``name`` is set at run
        time (this node's first), else None."""
        if name in self.dynamic_broker:
            return "DYNAMIC_BROKER_CONFIG"
        if name in self.dynamic_default:
            return "DYNAMIC_DEFAULT_BROKER_CONFIG"
        return None

    def without_effect_warning(self) -> str | None:
        """One message naming every Kafka property set without effect here, by reason (one
        line per reason)."""
        if not self.without_effect:
            return None
        by_reason: dict[str, list[str]] = {}
        for name, reason in sorted(self.without_effect.items()):
            by_reason.setdefault(reason, []).append(name)
        lines = [f"\n  {', '.join(names)}: {reason}" for reason, names in by_reason.items()]
        return (
            f"{len(self.without_effect)} Kafka broker properties have no effect in pydmq and "
            f"are ignored:{''.join(lines)}"
        )

    @property
    def node_id(self) -> int:
        """``node.id``; Kafka's synonym ``broker.id`` when only that one is set."""
        if not self.is_explicit("node.id") and self.get_int("broker.id") >= 0:
            return self.get_int("broker.id")
        return self.get_int("node.id")

    def _check_node_id_synonym(self) -> None:
        broker_id = self.get_int("broker.id")
        if self.is_explicit("node.id") and broker_id >= 0 and broker_id != self.node_id:
            raise ConfigError(
                f"broker.id {broker_id} and node.id {self.node_id} differ; set only node.id"
            )

    def _check_quorum_bootstrap(self, raw: object) -> None:
        """Kafka 4's own single-node server.properties names its quorum with
        ``controller.quorum.bootstrap.servers=<its controller listener>`` (a standalone
        KRaft quorum): that is pydmq's single-node mode. Any other dynamic quorum is refused
        rather than run as unrelated single nodes."""
        if raw is None or self.is_cluster_mode:
            return
        servers = parse_value(T.LIST, raw, "controller.quorum.bootstrap.servers")
        assert isinstance(servers, list)
        ports = {
            _listener_uri_port(uri)
            for uri in self.listeners
            if _listener_uri_name(uri) in self.controller_listener_names
        }
        standalone = (
            len(servers) == 1
            and "controller" in self.process_roles
            and servers[0].rpartition(":")[2] in ports
        )
        if servers and not standalone:
            raise ConfigError(
                f"controller.quorum.bootstrap.servers={','.join(servers)} names a dynamic "
                "controller quorum (KIP-853), which pydmq does not support: list the voters "
                "in controller.quorum.voters (id@host:port,...), or name only this node's "
                "controller listener to run a single node"
            )

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

    @property
    def process_roles(self) -> frozenset[str]:
        """``{"broker", "controller"}`` by default."""
        return frozenset(self.get_list("process.roles"))

    @property
    def controller_quorum_voters(self) -> dict[int, tuple[str, int]]:
        """Voter id -> (host, port) of its controller listener; empty in single-node mode."""
        return parse_quorum_voters(self.get_list("controller.quorum.voters"))

    @property
    def is_cluster_mode(self) -> bool:
        """True when ``controller.quorum.voters`` is set (see docs/CLUSTER.md)."""
        return bool(self.controller_quorum_voters)

    @property
    def controller_listener_names(self) -> list[str]:
        """Listener names serving controller APIs only (the first is the one voters dial)."""
        return self.get_list("controller.listener.names")

    @property
    def inter_broker_listener_name(self) -> str:
        return self.get_str("inter.broker.listener.name")

    @property
    def control_plane_listener_name(self) -> str:
        """The listener of the controller's pushes: ``control.plane.listener.name``, else
        :data:`DEFAULT_CONTROL_PLANE_LISTENER` (every node of a cluster must agree)."""
        name = self.get("control.plane.listener.name")
        return str(name) if name else DEFAULT_CONTROL_PLANE_LISTENER

    def listener_security_protocols(self) -> dict[str, str]:
        """Listener name -> security protocol; controller listeners default to PLAINTEXT."""
        mapping: dict[str, str] = {}
        for item in self.get_list("listener.security.protocol.map"):
            name, sep, protocol = item.partition(":")
            if sep:
                mapping[name.strip()] = protocol.strip()
        for name in self.controller_listener_names:
            mapping.setdefault(name, "PLAINTEXT")
        # pydmq's own control-plane listener (beside the inter-broker one) shares its protocol.
        inter = self.get_str("inter.broker.listener.name")
        mapping.setdefault(self.control_plane_listener_name, security_protocol(mapping, inter))
        return mapping

    def check_cluster_mode(self) -> None:
        """Cross-key checks of a cluster-mode config (Kafka's start-up checks); raises ConfigError.

        A no-op in single-node mode. A controller must be one of the voters and bind a
        controller listener; a broker must bind the inter-broker listener, and the configured
        ``control.plane.listener.name`` (Kafka's KIP-291 rules); no listener may be two of a
        controller listener, the inter-broker one and the control-plane one.
        """
        voters = self.controller_quorum_voters
        if not voters:
            return
        roles = self.process_roles
        names = {_listener_uri_name(uri) for uri in self.listeners}
        controller_names = self.controller_listener_names
        inter_broker = self.inter_broker_listener_name
        if "controller" in roles:
            if self.node_id not in voters:
                raise ConfigError(
                    f"node.id {self.node_id} has the controller role but is not in "
                    f"controller.quorum.voters ({', '.join(map(str, sorted(voters)))})"
                )
            if controller_names[0] not in names:
                raise ConfigError(
                    f"the controller role needs a {controller_names[0]} listener in listeners"
                )
        elif self.node_id in voters:
            raise ConfigError(f"node.id {self.node_id} is a voter but lacks the controller role")
        if "broker" in roles:
            if inter_broker in controller_names:
                raise ConfigError(
                    f"inter.broker.listener.name {inter_broker} is a controller listener"
                )
            if inter_broker not in names:
                raise ConfigError(f"inter.broker.listener.name {inter_broker} is not in listeners")
            control_plane = self.control_plane_listener_name
            if control_plane in controller_names or control_plane == inter_broker:
                raise ConfigError(
                    f"control.plane.listener.name {control_plane} must differ from the "
                    "controller and inter-broker listeners"
                )
            if self.get("control.plane.listener.name") and control_plane not in names:
                raise ConfigError(
                    f"control.plane.listener.name {control_plane} is not in listeners"
                )

    def cleaner_settings(self) -> CleanerSettings:
        """The ``log.cleaner.*`` settings as they are now (static, then dynamic layers)."""
        rate = self.get("log.cleaner.io.max.bytes.per.second")
        assert isinstance(rate, float | int), rate
        return CleanerSettings(
            enable=self.get_bool("log.cleaner.enable"),
            threads=self.get_int("log.cleaner.threads"),
            dedupe_buffer_size=self.get_int("log.cleaner.dedupe.buffer.size"),
            io_max_bytes_per_second=float(rate),
            backoff_ms=self.get_int("log.cleaner.backoff.ms"),
        )

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


def _listener_uri_name(uri: str) -> str:
    """``"CONTROLLER://127.0.0.1:19092"`` -> ``"CONTROLLER"``."""
    return uri.partition("://")[0].strip()


def _listener_uri_port(uri: str) -> str:
    """``"CONTROLLER://127.0.0.1:19092"`` -> ``"19092"``."""
    return uri.rpartition(":")[2].strip()
