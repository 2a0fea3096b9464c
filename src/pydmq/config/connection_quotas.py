"""Kafka's connection quota properties, honoured by :mod:`pydmq.net.connection_quotas`:
``max.connections``, ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``.
Dynamic, as in Kafka: a change applies to the next connection accepted.
"""

from __future__ import annotations

from pydmq.config.definitions import ConfigDef, at_least
from pydmq.config.definitions import ConfigType as T

__all__ = ["CONNECTION_QUOTA_CONFIGS", "UNLIMITED", "parse_ip_overrides"]

UNLIMITED = 2**31 - 1  # Kafka's default for every connection limit


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
        "max.connections.per.ip.overrides",
        T.STRING,
        "",
        "Per-address exceptions to max.connections.per.ip: host:count pairs, comma-separated.",
        _valid_ip_overrides,
    ),
)
