"""Kafka's GROUP config resource (ConfigResource type 32, Kafka 4.x's GroupConfig): the
per-group configs a group id may set with IncrementalAlterConfigs (or AlterConfigs), their
defaults (the broker's ``group.*`` properties) and Kafka's validation rules.

Sans-IO: the controller checks a GROUP resource's new configs with :func:`check_group_configs`
before it commits them as ConfigRecords; DescribeConfigs and the share groups read a group's
effective values with :func:`effective_group_configs`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydmq.config.definitions import ConfigError, ConfigType

__all__ = [
    "GROUP_CONFIGS",
    "SHARE_AUTO_OFFSET_RESET",
    "SHARE_ISOLATION_LEVEL",
    "SHARE_RECORD_LOCK_DURATION",
    "GroupConfigDef",
    "auto_offset_reset_duration_ms",
    "check_group_configs",
    "effective_group_configs",
]

CONSUMER_SESSION_TIMEOUT = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    """One group config: its type, the broker property its default comes from (or a fixed
    default) and, for an int, the broker properties bounding it (Kafka's min/max)."""

    name: str
    type: ConfigType
    default: str
    broker_default: str | None = None
    minimum: tuple[str, int] | None = None
    maximum: tuple[str, int] | None = None
    doc: str = ""


GROUP_CONFIGS: tuple[GroupConfigDef, ...] = (
    GroupConfigDef(
        CONSUMER_SESSION_TIMEOUT,
        ConfigType.INT,
        "45000",
        "group.consumer.session.timeout.ms",
        ("group.consumer.min.session.timeout.ms", 45000),
        ("group.consumer.max.session.timeout.ms", 60000),
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    GroupConfigDef(
        CONSUMER_HEARTBEAT_INTERVAL,
        ConfigType.INT,
        "5000",
        "group.consumer.heartbeat.interval.ms",
        ("group.consumer.min.heartbeat.interval.ms", 5000),
        ("group.consumer.max.heartbeat.interval.ms", 15000),
        "The heartbeat interval given to the members of a consumer group.",
    ),
    GroupConfigDef(
        SHARE_SESSION_TIMEOUT,
        ConfigType.INT,
        "45000",
        "group.share.session.timeout.ms",
        ("group.share.min.session.timeout.ms", 45000),
        ("group.share.max.session.timeout.ms", 60000),
        "The timeout to detect client failures when using the share group protocol.",
    ),
    GroupConfigDef(
        SHARE_HEARTBEAT_INTERVAL,
        ConfigType.INT,
        "5000",
        "group.share.heartbeat.interval.ms",
        ("group.share.min.heartbeat.interval.ms", 5000),
        ("group.share.max.heartbeat.interval.ms", 15000),
        "The heartbeat interval given to the members of a share group.",
    ),
    GroupConfigDef(
        SHARE_RECORD_LOCK_DURATION,
        ConfigType.INT,
        "30000",
        "group.share.record.lock.duration.ms",
        ("group.share.min.record.lock.duration.ms", 15000),
        ("group.share.max.record.lock.duration.ms", 60000),
        "The record acquisition lock duration in milliseconds for share groups.",
    ),
    GroupConfigDef(
        SHARE_AUTO_OFFSET_RESET,
        ConfigType.STRING,
        "latest",
        doc="Where a share group starts reading a partition it has no state for: latest, "
        "earliest, or by_duration:<ISO-8601 duration> (the first record at or after now "
        "minus the duration).",
    ),
    GroupConfigDef(
        SHARE_ISOLATION_LEVEL,
        ConfigType.STRING,
        "read_uncommitted",
        doc="Whether a share group reads transactional records only once committed.",
    ),
)
_BY_NAME = {d.name: d for d in GROUP_CONFIGS}

# PnDTnHnMnS, as java.time.Duration.parse reads it (days, hours, minutes, seconds).
_DURATION = re.compile(
    r"[-+]?P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+(?:[.,]\d{0,9})?)S)?)?",
    re.IGNORECASE,
)


def auto_offset_reset_duration_ms(value: str) -> int | None:
    """The duration of a ``by_duration:<ISO-8601>`` reset in ms, None for latest/earliest.
    Raises ConfigError for anything else (Kafka's ShareGroupAutoOffsetResetStrategy)."""
    lowered = value.lower()
    if lowered in ("latest", "earliest"):
        return None
    if not lowered.startswith("by_duration:"):
        raise ConfigError(
            f"Invalid value `{value}` for configuration {SHARE_AUTO_OFFSET_RESET}. The value "
            "must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
        )
    text = value[len("by_duration:") :]
    match = _DURATION.fullmatch(text)
    if match is None or text.upper() in ("P", "PT") or text.upper().endswith("T"):
        raise ConfigError(f"Unable to parse duration string '{text}' for duration:")
    days, hours, minutes, seconds = (g or "0" for g in match.groups())
    total = (
        int(days) * 86_400_000
        + int(hours) * 3_600_000
        + int(minutes) * 60_000
        + round(float(seconds.replace(",", ".")) * 1000)
    )
    if text.startswith("-"):
        total = -total
    if total < 0:
        raise ConfigError(f"Duration cannot be negative: {text}")
    return total


def _broker_value(broker: Mapping[str, object], name: str, fallback: object) -> int:
    value = broker.get(name, fallback)
    return int(str(value))


def _check_value(definition: GroupConfigDef, raw: str, broker: Mapping[str, object]) -> None:
    name = definition.name
    if definition.type == ConfigType.INT:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(
                f"Invalid value {raw} for configuration {name}: Not a number of type INT"
            ) from None
        for bound, smaller in ((definition.minimum, False), (definition.maximum, True)):
            if bound is None:
                continue
            limit = _broker_value(broker, bound[0], bound[1])
            if (value > limit) if smaller else (value < limit):
                relation = "less" if smaller else "greater"
                raise ConfigError(f"{name} must be {relation} than or equal to {bound[0]}")
    elif name == SHARE_AUTO_OFFSET_RESET:
        auto_offset_reset_duration_ms(raw)
    elif name == SHARE_ISOLATION_LEVEL and raw not in ("read_committed", "read_uncommitted"):
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: String must be one of: "
            "read_committed, read_uncommitted"
        )


def check_group_configs(configs: Mapping[str, str], broker: Mapping[str, object]) -> None:
    """Check a GROUP resource's new explicit configs as Kafka's GroupConfig.validate does
    (unknown name, bad value, out of the broker's bounds, a heartbeat interval not below the
    session timeout); ``broker`` holds the broker properties bounding them. Raises
    ConfigError (INVALID_CONFIG)."""
    for name, raw in configs.items():
        definition = _BY_NAME.get(name)
        if definition is None:
            raise ConfigError(f"Unknown group config name: {name}")
        _check_value(definition, raw, broker)
    effective = effective_group_configs(configs, broker)
    for heartbeat, session in (
        (CONSUMER_HEARTBEAT_INTERVAL, CONSUMER_SESSION_TIMEOUT),
        (SHARE_HEARTBEAT_INTERVAL, SHARE_SESSION_TIMEOUT),
    ):
        if int(effective[heartbeat]) >= int(effective[session]):
            raise ConfigError(f"{heartbeat} must be less than {session}")


def effective_group_configs(
    explicit: Mapping[str, str], broker: Mapping[str, object]
) -> dict[str, str]:
    """Every group config's effective value: the group's own, else the broker property it
    defaults from, else Kafka's default."""
    values: dict[str, str] = {}
    for definition in GROUP_CONFIGS:
        if definition.name in explicit:
            values[definition.name] = explicit[definition.name]
        elif definition.broker_default is not None and definition.broker_default in broker:
            values[definition.name] = str(broker[definition.broker_default])
        else:
            values[definition.name] = definition.default
    return values
