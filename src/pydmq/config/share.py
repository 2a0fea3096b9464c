"""The share group properties (KIP-932) pydmq applies, with Kafka's names and defaults: the
acquisition lock, the delivery-count limit, the in-flight window of a share-partition, the
member session and heartbeat, and the share-session cap. Read once at start-up into
:class:`ShareSettings` (the broker's share coordinator, share-partition manager and sessions).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydmq.config.definitions import ConfigDef, ConfigType, ConfigValues, at_least

__all__ = [
    "SHARE_CONFIGS",
    "STATE_TOPIC_MIN_ISR",
    "STATE_TOPIC_PARTITIONS",
    "STATE_TOPIC_REPLICATION",
    "STATE_TOPIC_SEGMENT_BYTES",
    "ShareSettings",
]

RECORD_LOCK_DURATION = "group.share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "group.share.delivery.count.limit"
PARTITION_MAX_RECORD_LOCKS = "group.share.partition.max.record.locks"
SESSION_TIMEOUT = "group.share.session.timeout.ms"
HEARTBEAT_INTERVAL = "group.share.heartbeat.interval.ms"
MAX_SHARE_SESSIONS = "group.share.max.share.sessions"
STATE_TOPIC_PARTITIONS = "share.coordinator.state.topic.num.partitions"
STATE_TOPIC_REPLICATION = "share.coordinator.state.topic.replication.factor"
STATE_TOPIC_MIN_ISR = "share.coordinator.state.topic.min.isr"
STATE_TOPIC_SEGMENT_BYTES = "share.coordinator.state.topic.segment.bytes"


def _delivery_count_limit(value: object) -> str | None:
    return None if isinstance(value, int) and 2 <= value <= 10 else "must be within [2, 10]"


SHARE_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        RECORD_LOCK_DURATION,
        ConfigType.INT,
        30000,
        "How long a share consumer holds a record it acquired before it becomes available "
        "again (the acquisition lock).",
        at_least(1000),
        read_only=True,
    ),
    ConfigDef(
        DELIVERY_COUNT_LIMIT,
        ConfigType.INT,
        5,
        "Deliveries of a record after which it is archived instead of being made available again.",
        _delivery_count_limit,
        read_only=True,
    ),
    ConfigDef(
        PARTITION_MAX_RECORD_LOCKS,
        ConfigType.INT,
        2000,
        "In-flight records of a share-partition (from its start offset) at most.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        SESSION_TIMEOUT,
        ConfigType.INT,
        45000,
        "Time after its last heartbeat when a share group member is removed.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        HEARTBEAT_INTERVAL,
        ConfigType.INT,
        5000,
        "The heartbeat interval given to share group members.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        MAX_SHARE_SESSIONS,
        ConfigType.INT,
        2000,
        "Share sessions (ShareFetch) this broker keeps at most.",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        STATE_TOPIC_PARTITIONS,
        ConfigType.INT,
        50,
        "Partitions of __share_group_state when it is created (each share-partition's state "
        "lives in one, led by its share coordinator).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        STATE_TOPIC_REPLICATION,
        ConfigType.SHORT,
        3,
        "Replication factor of __share_group_state when it is created (capped at the "
        "brokers alive).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        STATE_TOPIC_MIN_ISR,
        ConfigType.SHORT,
        2,
        "min.insync.replicas of __share_group_state (capped at its replication factor).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        STATE_TOPIC_SEGMENT_BYTES,
        ConfigType.INT,
        104857600,
        "segment.bytes of __share_group_state.",
        at_least(14),
        read_only=True,
    ),
)


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The share group settings, read once at start-up."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_share_sessions: int = 2000

    @classmethod
    def from_config(cls, config: ConfigValues) -> ShareSettings:
        return cls(
            record_lock_duration_ms=config.get_int(RECORD_LOCK_DURATION),
            delivery_count_limit=config.get_int(DELIVERY_COUNT_LIMIT),
            partition_max_record_locks=config.get_int(PARTITION_MAX_RECORD_LOCKS),
            session_timeout_ms=config.get_int(SESSION_TIMEOUT),
            heartbeat_interval_ms=config.get_int(HEARTBEAT_INTERVAL),
            max_share_sessions=config.get_int(MAX_SHARE_SESSIONS),
        )
