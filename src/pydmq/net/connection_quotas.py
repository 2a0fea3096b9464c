"""ConnectionQuotas: how many connections a node keeps open, in all and per client address.

Kafka's limits, with Kafka's names: ``max.connections`` (every listener together),
``max.connections.per.ip`` and its ``max.connections.per.ip.overrides`` (``host:count,...``,
the host as the client's address reads). Kafka's per-listener
``listener.name.<listener>.max.connections`` and ``max.connection.creation.rate`` are not
enforced yet. The listeners nodes talk to each other on (inter-broker,
control plane, controller) are exempt from the all-listeners limit, as Kafka lets its
inter-broker connections in past it, so clients can never lock the nodes out of each other.

One more bound is pydmq's: every descriptor a connection holds is one the storage engine can
no longer open a segment with, so unless ``max.connections`` is lower, the connections of the
other listeners are capped by what the soft ``RLIMIT_NOFILE`` leaves once the storage
engine's share (``pydmq.log.open.files.share``) and :data:`RESERVED_DESCRIPTORS` (indexes,
checkpoints, the HTTP listener, outgoing connections) are set aside, and never below
:data:`MIN_CONNECTIONS`; a write that still meets EMFILE fails alone and leaves the log dir
online (:mod:`pydmq.storage.errors`). Measured before it: 1,000
idle client connections to a node under ``ulimit -n 512`` failed its next segment creation.

A connection over a limit is closed as soon as it is accepted, before any request is read
(Kafka closes one over its per-address limit the same way, and holds back accepting while
over ``max.connections``). Owned by the node, on its event loop; the limits are read from the
current config at each connection, so dynamic changes apply to the next one.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from pydmq.config.connection_quotas import UNLIMITED, parse_ip_overrides
from pydmq.config.definitions import ConfigValues

__all__ = [
    "MIN_CONNECTIONS",
    "RESERVED_DESCRIPTORS",
    "ConnectionLimits",
    "ConnectionQuotas",
    "descriptor_budget",
    "limits_from_config",
]

RESERVED_DESCRIPTORS = 128
MIN_CONNECTIONS = 32  # the cap never goes below this, however low RLIMIT_NOFILE is
_UNLIMITED_NOFILE = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as


def descriptor_budget(storage_share: float) -> int:
    """Connections the soft RLIMIT_NOFILE leaves once storage and the reserve have theirs."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = _UNLIMITED_NOFILE if soft == resource.RLIM_INFINITY else soft
    return max(MIN_CONNECTIONS, int(limit * (1 - storage_share)) - RESERVED_DESCRIPTORS)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The limits in force for the next connection (see the module docstring)."""

    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    ip_overrides: Mapping[str, int] | None = None

    def for_ip(self, host: str) -> int:
        return (self.ip_overrides or {}).get(host, self.max_per_ip)


def limits_from_config(config: ConfigValues, descriptors: int) -> ConnectionLimits:
    """The current limits of ``config``, ``max.connections`` capped at ``descriptors``."""
    return ConnectionLimits(
        min(config.get_int("max.connections"), descriptors),
        config.get_int("max.connections.per.ip"),
        parse_ip_overrides(config.get_str("max.connections.per.ip.overrides")),
    )


class ConnectionQuotas:
    """Counts the open connections in all and by address and admits or refuses new ones.
    ``limits`` gives the limits now (read at each admission); ``exempt`` names the listeners
    outside the all-listeners limit."""

    def __init__(
        self, limits: Callable[[], ConnectionLimits], exempt: Collection[str] = ()
    ) -> None:
        self._limits = limits
        self._exempt = frozenset(exempt)
        self._open: dict[int, tuple[str, str]] = {}  # connection id -> (listener, host)
        self._total = 0  # connections of listeners not exempt
        self._by_ip: dict[str, int] = {}
        self.refused = 0

    def admit(self, connection_id: int, listener: str, host: str) -> str | None:
        """Count the connection and answer None, or answer why it is refused (not counted)."""
        limits = self._limits()
        if self._by_ip.get(host, 0) >= limits.for_ip(host):
            return self._refuse(
                f"{host} has {limits.for_ip(host)} connections (max.connections.per.ip)"
            )
        exempt = listener in self._exempt
        if not exempt and self._total >= limits.max_connections:
            return self._refuse(
                f"{limits.max_connections} client connections are open (max.connections, "
                "or what RLIMIT_NOFILE leaves beside the storage engine's files)"
            )
        self._open[connection_id] = (listener, host)
        if not exempt:
            self._total += 1
        self._by_ip[host] = self._by_ip.get(host, 0) + 1
        return None

    def release(self, connection_id: int) -> None:
        """Forget a closed connection (nothing when it was never admitted)."""
        entry = self._open.pop(connection_id, None)
        if entry is None:
            return
        listener, host = entry
        if listener not in self._exempt:
            self._total -= 1
        _decrement(self._by_ip, host)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def _refuse(self, reason: str) -> str:
        self.refused += 1
        return reason


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
