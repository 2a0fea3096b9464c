"""The broker's client quota managers (Kafka's ClientQuotaManager and its kin).

:class:`ClientQuotaManager` enforces one quota key (``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage``, ``controller_mutation_rate``) for the
(user, client id) of each request:

- the quota that applies is the first set among, in Kafka's order of precedence:
  user + client id, user + default client id, user, default user + client id, default user +
  default client id, default user, client id, default client id;
- the rate it is measured against is per matched entity, with Kafka's metric tags: a quota of
  an entity with a user part (the user's or the default user's) is measured per user, one with
  a client-id part per client id, so two clients under a default client-id quota each get the
  full rate, and two clients of one user under a user quota share it;
- a recorded value that takes the rate above the quota answers Kafka's throttle time
  (:func:`~pydmq.quotas.rate.throttle_time_ms`); the value stays recorded, so the client
  waits until its average falls back under the quota.

With no quota of its key configured a manager is ``enabled = False`` and the request paths
skip it: no lookup, no clock read, no allocation. Resolved quotas are cached per
(user, client id) until the next change of the quotas. Sensors unused for an hour are dropped
(Kafka expires its quota sensors after an hour too), checked when the number of sensors has
doubled since the last check, so many short-lived client ids do not pile up.

:class:`QuotaManagers` is the broker's set of them, updated from the metadata image's
``client_quotas`` (a single node's local controller, a cluster broker's UpdateMetadata).
Owned by the broker's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from pydmq.metadata.image import QuotaEntity
from pydmq.quotas.configs import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
)
from pydmq.quotas.rate import SampledRate, throttle_time_ms

__all__ = ["ClientQuotaManager", "QuotaManagers", "QuotaSettings", "SensorKey", "monotonic_ms"]

# The candidates for (user, client id), most precise first: (user part, client part), where
# a part is None (the entity has no such type), "name" (the request's) or "default".
_PRECEDENCE: tuple[tuple[str | None, str | None], ...] = (
    ("name", "name"),
    ("name", "default"),
    ("name", None),
    ("default", "name"),
    ("default", "default"),
    ("default", None),
    (None, "name"),
    (None, "default"),
)

# The sensor of a matched quota: (user tag, client-id tag).
SensorKey = tuple[str, str]

# Kafka's InactiveSensorExpirationTimeSeconds, and the fewest sensors worth a check.
_SENSOR_EXPIRY_MS = 3_600_000
_FIRST_EXPIRY_CHECK = 1024


def monotonic_ms() -> int:
    """The clock the managers measure with, in milliseconds."""
    return time.monotonic_ns() // 1_000_000


class QuotaSettings:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` each."""

    __slots__ = ("samples", "window_ms")

    def __init__(self, samples: int = 11, window_seconds: int = 1) -> None:
        self.samples = samples
        self.window_ms = window_seconds * 1000


def _candidate(
    user: str, client_id: str, user_part: str | None, client_part: str | None
) -> QuotaEntity:
    pairs: list[tuple[str, str | None]] = []
    if client_part is not None:
        pairs.append((CLIENT_ID, client_id if client_part == "name" else None))
    if user_part is not None:
        pairs.append((USER, user if user_part == "name" else None))
    return tuple(pairs)  # sorted by type: client-id < user


class ClientQuotaManager:
    """One quota key's enforcement; see the module docstring."""

    def __init__(
        self, key: str, settings: QuotaSettings, clock: Callable[[], int] = monotonic_ms
    ) -> None:
        self.key = key
        self.enabled = False
        self._settings = settings
        self.clock = clock
        self._quotas: dict[QuotaEntity, float] = {}
        self._resolved: dict[tuple[str, str], tuple[float, SensorKey] | None] = {}
        self._rates: dict[SensorKey, SampledRate] = {}
        self._expiry_check_at = _FIRST_EXPIRY_CHECK

    def update(self, client_quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Take the quotas of this manager's key from the image's ``client_quotas``."""
        key = self.key
        self._quotas = {
            entity: values[key] for entity, values in client_quotas.items() if key in values
        }
        self._resolved.clear()
        self.enabled = bool(self._quotas)
        if not self.enabled:
            self._rates.clear()

    def quota(self, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        """The quota of (``user``, ``client_id``) and the sensor it is measured on, or None."""
        cache_key = (user, client_id)
        if cache_key in self._resolved:
            return self._resolved[cache_key]
        found: tuple[float, SensorKey] | None = None
        for user_part, client_part in _PRECEDENCE:
            bound = self._quotas.get(_candidate(user, client_id, user_part, client_part))
            if bound is not None:
                sensor = (
                    user if user_part is not None else "",
                    client_id if client_part is not None else "",
                )
                found = (bound, sensor)
                break
        self._resolved[cache_key] = found
        return found

    def _rate(self, sensor: SensorKey, now_ms: int) -> SampledRate:
        rate = self._rates.get(sensor)
        if rate is None:
            if len(self._rates) >= self._expiry_check_at:
                self._expire(now_ms)
            settings = self._settings
            rate = self._rates[sensor] = SampledRate(settings.samples, settings.window_ms, now_ms)
        return rate

    def _expire(self, now_ms: int) -> None:
        """Drop the sensors unused for an hour, and the cached resolutions with them."""
        self._rates = {
            sensor: rate
            for sensor, rate in self._rates.items()
            if now_ms - rate.current_start_ms < _SENSOR_EXPIRY_MS
        }
        self._resolved.clear()
        self._expiry_check_at = max(_FIRST_EXPIRY_CHECK, 2 * len(self._rates))

    @property
    def sensor_count(self) -> int:
        """How many sensors (rates) the manager keeps."""
        return len(self._rates)

    def record_and_get_throttle_time_ms(
        self, user: str, client_id: str, value: float, now_ms: int | None = None
    ) -> int:
        """Record ``value`` for the client and answer its throttle time (0: within quota)."""
        quota = self.quota(user, client_id)
        if quota is None:
            return 0
        bound, sensor = quota
        now = self.clock() if now_ms is None else now_ms
        rate = self._rate(sensor, now)
        rate.record(value, now)
        measured = rate.measure(now)
        if measured <= bound:
            return 0
        return throttle_time_ms(measured, bound, rate.window_ms(now))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> None:
        """Take back a value just recorded (a fetch answered empty because throttled)."""
        quota = self.quota(user, client_id)
        if quota is None:
            return
        now = self.clock() if now_ms is None else now_ms
        self._rate(quota[1], now).unrecord(value, now)

    @property
    def window_ms(self) -> int:
        """One quota window (``quota.window.size.seconds``), in milliseconds: Kafka's bound on
        a request-quota throttle time."""
        return self._settings.window_ms

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """The most the client may take in one quota window (``quota * (samples - 1) *
        window``, Kafka's cap on a throttled consumer's fetch size), None without a quota."""
        quota = self.quota(user, client_id)
        if quota is None:
            return None
        settings = self._settings
        return quota[0] * (settings.samples - 1) * settings.window_ms / 1000.0


class QuotaManagers:
    """The broker's quota managers, one per key, and the quotas they were built from (which
    DescribeClientQuotas answers)."""

    def __init__(
        self,
        settings: QuotaSettings,
        controller_settings: QuotaSettings | None = None,
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        from pydmq.quotas.controller_mutation import ControllerMutationQuotaManager

        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, settings, clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, settings, clock)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, settings, clock)
        self.controller_mutation = ControllerMutationQuotaManager(
            controller_settings or settings, clock
        )
        self.client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = {}

    def update(self, client_quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Install the quotas of a new metadata image."""
        self.client_quotas = client_quotas
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation):
            manager.update(client_quotas)
