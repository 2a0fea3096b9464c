"""Kafka's connection quota properties, honoured by :mod:`pydmq.net.connection_quotas` and
:mod:`pydmq.net.connection_rates`: ``max.connections``, ``max.connections.per.ip``,
``max.connections.per.ip.overrides`` and ``max.connection.creation.rate``, dynamic as in
Kafka (a change applies to the next connection accepted); and one listener's
``listener.name.<listener>.max.connections`` and ``...max.connection.creation.rate``, read at
start-up (:func:`pop_listener_limits`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydmq.config.definitions import ConfigDef, ConfigError, at_least
from pydmq.config.definitions import ConfigType as T

__all__ = [
    "CONNECTION_QUOTA_CONFIGS",
    "UNLIMITED",
    "ListenerLimits",
    "parse_ip_overrides",
    "pop_listener_limits",
]

UNLIMITED = 2**31 - 1  # Kafka's default for every connection limit

_LISTENER_LIMIT = re.compile(
    r"^listener\.name\.([a-z0-9_.-]+?)\.(max\.connections|max\.connection\.creation\.rate)$"
)


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """One listener's own limits (UNLIMITED: none)."""

    max_connections: int = UNLIMITED
    max_connection_creation_rate: int = UNLIMITED


def pop_listener_limits(values: dict[str, object]) -> dict[str, ListenerLimits]:
    """Take every ``listener.name.<listener>.max.connections`` and
    ``...max.connection.creation.rate`` out of ``values``; lower-case listener name -> its
    limits. A value that is not a whole number of at least 0 is a ConfigError."""
    found: dict[str, dict[str, int]] = {}
    for name in list(values):
        match = _LISTENER_LIMIT.match(name)
        if match is None:
            continue
        raw = str(values.pop(name)).strip()
        if not raw.isdigit():
            raise ConfigError(f"invalid value {raw!r} for {name}: not a whole number >= 0")
        found.setdefault(match.group(1), {})[match.group(2)] = min(int(raw), UNLIMITED)
    return {
        listener: ListenerLimits(
            limits.get("max.connections", UNLIMITED),
            limits.get("max.connection.creation.rate", UNLIMITED),
        )
        for listener, limits in found.items()
    }


def parse_ip_overrides(raw: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        host, sep, count = item.strip().rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item.strip()!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def _valid_ip_overrides(value: object) -> str | None:
    try:
        parse_ip_overrides(str(value))
    except ValueError as exc:
        return str(exc)
    return None


CONNECTION_QUOTA_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "max.connections",
        T.INT,
        UNLIMITED,
        "Connections the node keeps open on all its listeners together, except those the "
        "nodes talk to each other on; a connection beyond it is closed when accepted. pydmq "
        "also caps it at what the soft RLIMIT_NOFILE leaves beside the storage engine's share.",
        at_least(0),
    ),
    ConfigDef(
        "max.connections.per.ip",
        T.INT,
        UNLIMITED,
        "Connections one client address may have open; one beyond it is closed when accepted.",
        at_least(0),
    ),
    ConfigDef(
        "max.connection.creation.rate",
        T.INT,
        UNLIMITED,
        "New connections per second the node accepts on all its listeners together, except "
        "those the nodes talk to each other on (Kafka's quota windows); a connection beyond "
        "it waits its turn before any of its requests is read.",
        at_least(0),
    ),
    ConfigDef(
        "max.connections.per.ip.overrides",
        T.STRING,
        "",
        "Per-address exceptions to max.connections.per.ip: host:count pairs, comma-separated.",
        _valid_ip_overrides,
    ),
)
