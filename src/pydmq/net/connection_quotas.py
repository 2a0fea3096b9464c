"""ConnectionQuotas: how many connections a node keeps open, in all and per client address.

Kafka's limits, with Kafka's names: ``max.connections`` (every listener together),
``max.connections.per.ip`` and its ``max.connections.per.ip.overrides`` (``host:count,...``,
the host as the client's address reads), and one listener's
``listener.name.<listener>.max.connections``. The listeners nodes talk to each other on
(inter-broker, control plane, controller) are exempt from the all-listeners limit, as Kafka
lets its inter-broker connections in past it, so clients can never lock the nodes out of each
other. How fast connections may be created (``max.connection.creation.rate``, per listener,
per address) is :mod:`pydmq.net.connection_rates`; it is checked after these counts.

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
over ``max.connections``). One over an address's creation-rate quota is closed after its
throttle time; one over a listener's or all listeners' creation rate is served after its
delay (:class:`Admission`). Owned by the node, on its event loop; the limits are read from the
current config at each connection, so dynamic changes apply to the next one.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from pydmq.config.connection_quotas import UNLIMITED, ListenerLimits, parse_ip_overrides
from pydmq.config.definitions import ConfigValues
from pydmq.metadata.image import QuotaEntity
from pydmq.net.connection_rates import ConnectionCreationRates, RateLimits
from pydmq.quotas.configs import CONNECTION_CREATION_RATE, IP

__all__ = [
    "MIN_CONNECTIONS",
    "RESERVED_DESCRIPTORS",
    "Admission",
    "ConnectionLimits",
    "ConnectionQuotas",
    "descriptor_budget",
    "ip_connection_rates",
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
    # Lower-case listener name -> its listener.name.<listener>.* limits.
    listeners: Mapping[str, ListenerLimits] | None = None
    max_creation_rate: int = UNLIMITED
    # Address (None: the default ip entity) -> its connection_creation_rate quota.
    ip_rates: Mapping[str | None, int] | None = None

    def for_ip(self, host: str) -> int:
        return (self.ip_overrides or {}).get(host, self.max_per_ip)

    def for_listener(self, listener: str) -> ListenerLimits:
        return (self.listeners or {}).get(listener.lower(), _NO_LISTENER_LIMITS)

    def ip_rate(self, host: str) -> int:
        rates = self.ip_rates or {}
        return rates.get(host, rates.get(None, UNLIMITED))


_NO_LISTENER_LIMITS = ListenerLimits()


@dataclass(frozen=True, slots=True)
class Admission:
    """A connection not admitted as is: ``refusal`` closes it (after ``delay_ms`` when set);
    without one, it is served after ``delay_ms``."""

    refusal: str | None = None
    delay_ms: int = 0


def limits_from_config(
    config: ConfigValues,
    descriptors: int,
    listeners: Mapping[str, ListenerLimits] | None = None,
    ip_rates: Mapping[str | None, int] | None = None,
) -> ConnectionLimits:
    """The current limits of ``config``, ``max.connections`` capped at ``descriptors``;
    ``listeners``' own limits and the addresses' quotas as given."""
    return ConnectionLimits(
        min(config.get_int("max.connections"), descriptors),
        config.get_int("max.connections.per.ip"),
        parse_ip_overrides(config.get_str("max.connections.per.ip.overrides")),
        listeners,
        config.get_int("max.connection.creation.rate"),
        ip_rates,
    )


def ip_connection_rates(
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]],
) -> dict[str | None, int]:
    """The ``connection_creation_rate`` of every ip entity among ``client_quotas``."""
    out: dict[str | None, int] = {}
    for entity, values in client_quotas.items():
        if len(entity) == 1 and entity[0][0] == IP and CONNECTION_CREATION_RATE in values:
            out[entity[0][1]] = int(values[CONNECTION_CREATION_RATE])
    return out


class ConnectionQuotas:
    """Counts the open connections in all and by address and admits or refuses new ones.
    ``limits`` gives the limits now (read at each admission); ``exempt`` names the listeners
    outside the all-listeners limit."""

    def __init__(
        self,
        limits: Callable[[], ConnectionLimits],
        exempt: Collection[str] = (),
        rates: ConnectionCreationRates | None = None,
    ) -> None:
        self._limits = limits
        self._exempt = frozenset(exempt)
        self._rates = rates or ConnectionCreationRates(11, 1000, exempt)
        self._open: dict[int, tuple[str, str]] = {}  # connection id -> (listener, host)
        self._total = 0  # connections of listeners not exempt
        self._by_ip: dict[str, int] = {}
        self._by_listener: dict[str, int] = {}
        self.refused = 0
        self.delayed = 0

    def admit(self, connection_id: int, listener: str, host: str, now_ms: int) -> Admission | None:
        """Count the connection and answer None (serve it now) or an :class:`Admission`
        that delays it; or refuse it (not counted), saying why."""
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
        own = limits.for_listener(listener)
        if self._by_listener.get(listener, 0) >= own.max_connections:
            return self._refuse(
                f"listener {listener} has {own.max_connections} connections "
                f"(listener.name.{listener.lower()}.max.connections)"
            )
        if not exempt:
            quota = limits.ip_rate(host)
            throttle = self._rates.ip_throttle_ms(host, now_ms, quota)
            if throttle:
                return self._refuse(
                    f"{host} creates connections faster than its quota of {quota}/s "
                    f"(connection_creation_rate); closing in {throttle} ms",
                    throttle,
                )
        delay = self._rates.delay_ms(
            listener,
            now_ms,
            RateLimits(limits.max_creation_rate, own.max_connection_creation_rate),
        )
        self._open[connection_id] = (listener, host)
        if not exempt:
            self._total += 1
        self._by_ip[host] = self._by_ip.get(host, 0) + 1
        self._by_listener[listener] = self._by_listener.get(listener, 0) + 1
        if delay:
            self.delayed += 1
            return Admission(delay_ms=delay)
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
        _decrement(self._by_listener, listener)

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def _refuse(self, reason: str, close_after_ms: int = 0) -> Admission:
        self.refused += 1
        return Admission(reason, close_after_ms)


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
