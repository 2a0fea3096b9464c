"""Dynamic broker configs: what IncrementalAlterConfigs and AlterConfigs may set on a BROKER
resource, checked as Kafka's DynamicBrokerConfig checks it. Pure functions, no state.

A layer is a ``{name: raw value}`` dict: the cluster-wide default (resource name "") or one
broker's own. A change may set:

- pydmq's own broker properties that Kafka can change at run time and pydmq applies at once
  (``read_only`` false in :data:`~pydmq.config.broker.BROKER_CONFIGS`: the topic defaults such
  as ``log.retention.ms``, ``producer.id.expiration.ms``, pydmq's partition budgets);
- the Kafka properties pydmq accepts without effect that Kafka can change at run time
  (:mod:`pydmq.config.kafka_broker_defs`), validated by their type and kept;
- any other name (Kafka accepts custom keys and keeps them).

Answers as Kafka 4.4's: a property that cannot change at run time -> INVALID_REQUEST
"Cannot update these configs dynamically: [names]"; a value that does not parse ->
INVALID_REQUEST "Invalid value V for configuration N: ..."; APPEND/SUBTRACT on a property that
is not a list -> INVALID_CONFIG; an unknown operation or a null value to set ->
INVALID_REQUEST. ``listeners`` and ``listener.security.protocol.map`` are dynamic in Kafka
but bound at start-up in pydmq: refused as read-only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydmq.config.broker import BROKER_CONFIGS
from pydmq.config.definitions import ConfigDef, ConfigError, ConfigType, parse_value
from pydmq.config.kafka_broker_defs import kafka_only_configs
from pydmq.protocol.errors import ErrorCode

__all__ = ["OP_APPEND", "OP_DELETE", "OP_SET", "OP_SUBTRACT", "DynamicConfigError", "updated_layer"]

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OWN: dict[str, ConfigDef] = {d.name: d for d in BROKER_CONFIGS}


class DynamicConfigError(Exception):
    """A refused change: the Kafka error code and message for the resource."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _kind(name: str) -> tuple[ConfigType | None, bool]:
    """(type, changeable at run time) of ``name``; (None, True) for a custom key."""
    own = _OWN.get(name)
    if own is not None:
        return own.type, not own.read_only
    kafka = kafka_only_configs().get(name)
    if kafka is not None:
        return kafka.type, kafka.dynamic
    return None, True


def _check_value(name: str, kind: ConfigType | None, raw: str) -> None:
    if kind is None:
        return
    try:
        parse_value(kind, raw, name)
        own = _OWN.get(name)
        if own is not None:
            own.parse(raw)
    except ConfigError as exc:
        if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE):
            reason = f"Not a number of type {kind.name}"
        elif kind == ConfigType.BOOLEAN:
            reason = "Expected value to be either true or false"
        else:
            reason = str(exc)
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST, f"Invalid value {raw} for configuration {name}: {reason}"
        ) from None


def updated_layer(
    layer: Mapping[str, str],
    changes: Sequence[tuple[str, int, str | None]],
    effective: Callable[[str], str | None],
) -> dict[str, str]:
    """``layer`` after ``changes`` ((name, operation, value), Kafka's AlterConfigOp codes);
    ``effective(name)`` is the value a list APPEND/SUBTRACT starts from when the layer does
    not set it. Raises :class:`DynamicConfigError`; ``layer`` is not modified."""
    out = dict(layer)
    fixed: list[str] = []
    for name, operation, value in changes:
        if operation not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation}"
            )
        if operation != OP_DELETE and value is None:
            raise DynamicConfigError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
            )
        kind, changeable = _kind(name)
        if not changeable:
            fixed.append(name)
            continue
        if operation in (OP_APPEND, OP_SUBTRACT) and kind != ConfigType.LIST:
            verb = "append" if operation == OP_APPEND else "subtract"
            raise DynamicConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Config value {verb} is not allowed for config key: {name}",
            )
        if operation == OP_DELETE:
            out.pop(name, None)
            continue
        assert value is not None
        if operation != OP_SET:
            start = out.get(name, effective(name)) or ""
            items = [v.strip() for v in start.split(",") if v.strip()]
            given = [v.strip() for v in value.split(",") if v.strip()]
            if operation == OP_APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            value = ",".join(items)
        _check_value(name, kind, value)
        out[name] = value
    if fixed:
        raise DynamicConfigError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: [{', '.join(fixed)}]",
        )
    return out
