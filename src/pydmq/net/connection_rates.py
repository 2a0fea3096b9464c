"""ConnectionCreationRates: how fast a node takes new connections (Kafka's KIP-612).

Three limits, with Kafka's names, each a rate per second over Kafka's quota windows
(``quota.window.num`` samples of ``quota.window.size.seconds``; :class:`SampledRate`):

- ``max.connection.creation.rate``: every listener together, except the listeners the nodes
  talk to each other on (Kafka exempts its inter-broker listener the same way);
- ``listener.name.<listener>.max.connection.creation.rate``: one listener, exempt or not;
- the ``connection_creation_rate`` client quota of the client's address (an ``ip`` entity,
  else the default ``ip`` entity; AlterClientQuotas).

Over a listener or the all-listeners rate, a new connection is *delayed*: Kafka's acceptor
stops accepting for the throttle time, so a connection waits in the kernel's backlog; here
it is accepted and nothing of it is read until its turn. Connections of one listener take
their turns in arrival order, each recorded at its turn, as Kafka's single acceptor thread
does. Over the address's quota, the connection is refused: it is not counted in the rate,
and it is closed after the throttle time (Kafka's delayed close), so a client that reconnects
at once does not spin. A throttle time is at most one quota window (Kafka's bound).

Sans-IO: callers pass the time in milliseconds. Owned by the node's event loop.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pydmq.config.connection_quotas import UNLIMITED
from pydmq.quotas.rate import SampledRate, throttle_time_ms

__all__ = ["ConnectionCreationRates", "RateLimits"]

_FIRST_EXPIRY_CHECK = 1024  # address rates kept before idle ones are looked for


@dataclass(frozen=True, slots=True)
class RateLimits:
    """The creation-rate limits in force for the next connection (UNLIMITED: none)."""

    broker: int = UNLIMITED
    listener: int = UNLIMITED


class ConnectionCreationRates:
    """The rates of new connections: all listeners, per listener, per client address."""

    def __init__(self, samples: int, window_ms: int, exempt: Collection[str] = ()) -> None:
        self._samples = samples
        self._window_ms = window_ms
        self._exempt = frozenset(exempt)
        self._broker: SampledRate | None = None
        self._listeners: dict[str, SampledRate] = {}
        # When each listener's acceptor is free again (the last delayed connection's turn).
        self._turns: dict[str, int] = {}
        self._ips: dict[str, SampledRate] = {}
        self._expiry_check_at = _FIRST_EXPIRY_CHECK

    def delay_ms(self, listener: str, now_ms: int, limits: RateLimits) -> int:
        """Record a connection accepted on ``listener``: how long it waits before it is
        served (0: at once)."""
        turn = max(now_ms, self._turns.get(listener, now_ms))
        throttle = 0
        if limits.listener < UNLIMITED:
            rate = self._listeners.get(listener)
            if rate is None:
                rate = self._listeners[listener] = self._new(turn)
            throttle = self._record(rate, limits.listener, turn)
        if limits.broker < UNLIMITED and listener not in self._exempt:
            if self._broker is None:
                self._broker = self._new(turn)
            throttle = max(throttle, self._record(self._broker, limits.broker, turn))
        if throttle == 0 and turn == now_ms:
            self._turns.pop(listener, None)
            return 0
        self._turns[listener] = turn + throttle
        return turn + throttle - now_ms

    def ip_throttle_ms(self, host: str, now_ms: int, quota: int) -> int:
        """Record a connection from ``host`` under its address quota: 0 admits it, else the
        time after which it is closed (it is then not counted)."""
        if quota >= UNLIMITED:
            return 0
        rate = self._ips.get(host)
        if rate is None:
            if len(self._ips) >= self._expiry_check_at:
                self._expire(now_ms)
            rate = self._ips[host] = self._new(now_ms)
        throttle = self._record(rate, quota, now_ms)
        if throttle:
            rate.unrecord(1.0, now_ms)
        return throttle

    @property
    def tracked_addresses(self) -> int:
        return len(self._ips)

    def _new(self, now_ms: int) -> SampledRate:
        return SampledRate(self._samples, self._window_ms, now_ms)

    def _record(self, rate: SampledRate, bound: int, now_ms: int) -> int:
        rate.record(1.0, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        if bound <= 0:
            return self._window_ms
        throttle = throttle_time_ms(measured, bound, rate.window_ms(now_ms))
        return max(1, min(throttle, self._window_ms))

    def _expire(self, now_ms: int) -> None:
        """Drop the address rates nothing was recorded into for all their samples."""
        idle = self._samples * self._window_ms
        self._ips = {h: r for h, r in self._ips.items() if now_ms - r.current_start_ms < idle}
        self._expiry_check_at = max(_FIRST_EXPIRY_CHECK, 2 * len(self._ips))
