"""Kafka's controller mutation quota (KIP-599): partitions created or deleted per second.

:class:`TokenBucket` is Kafka's ``TokenBucket`` stat: it holds up to a burst of
``quota * samples * window`` tokens (``controller.quota.window.num`` x
``controller.quota.window.size.seconds``), starts full, refills at the quota per second and
loses one token per partition created or deleted; it may go negative. A client whose bucket
is negative is over its quota, and must wait ``-tokens / quota`` seconds (Kafka's
``ControllerMutationQuotaManager.throttleTimeMs``).

:class:`ControllerMutationQuota` is one request's view (Kafka's Strict and Permissive
ControllerMutationQuota): a strict one (CreateTopics v6+, CreatePartitions v3+, DeleteTopics
v5+) refuses a topic when the bucket is already negative (THROTTLING_QUOTA_EXCEEDED), a
permissive one (older versions) accepts it; both take the tokens of what they accept and keep
the throttle time of the last violation, which the response carries.

Sans-IO (the caller passes the time); owned by the broker's event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydmq.metadata.image import QuotaEntity
from pydmq.quotas.configs import CONTROLLER_MUTATION_RATE
from pydmq.quotas.manager import ClientQuotaManager, QuotaSettings, SensorKey, monotonic_ms

__all__ = ["ControllerMutationQuota", "ControllerMutationQuotaManager", "TokenBucket"]


class TokenBucket:
    """Kafka's ``TokenBucket`` for one sensor; see the module docstring."""

    __slots__ = ("_last_ms", "tokens")

    def __init__(self) -> None:
        self.tokens = 0.0
        self._last_ms: int | None = None

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        """The tokens at ``now_ms`` (a new bucket is full)."""
        if self._last_ms is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now_ms: int) -> None:
        self.refill(quota, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)


class ControllerMutationQuota:
    """One request's controller mutation quota; see the module docstring."""

    __slots__ = ("_bucket", "_burst", "_clock", "_quota", "_strict", "throttle_time_ms")

    def __init__(
        self,
        bucket: TokenBucket,
        quota: float,
        burst: float,
        strict: bool,
        clock: Callable[[], int],
    ) -> None:
        self._bucket = bucket
        self._quota = quota
        self._burst = burst
        self._strict = strict
        self._clock = clock
        self.throttle_time_ms = 0

    def _violation(self, tokens: float) -> None:
        self.throttle_time_ms = int(-tokens / self._quota * 1000 + 0.5)

    def record(self, partitions: int) -> bool:
        """Take ``partitions`` tokens; False (nothing taken) when a strict quota is already
        exceeded: the topic is refused with THROTTLING_QUOTA_EXCEEDED."""
        now = self._clock()
        bucket = self._bucket
        tokens = bucket.refill(self._quota, self._burst, now)
        if tokens < 0:
            self._violation(tokens)
            if self._strict:
                return False
        bucket.record(partitions, self._quota, self._burst, now)
        if not self._strict and bucket.tokens < 0:
            self._violation(bucket.tokens)
        return True


class ControllerMutationQuotaManager:
    """``controller_mutation_rate`` per client, with the entity precedence and sensors of
    :class:`~pydmq.quotas.manager.ClientQuotaManager`; ``enabled`` False without any."""

    def __init__(self, settings: QuotaSettings, clock: Callable[[], int] = monotonic_ms) -> None:
        self._resolver = ClientQuotaManager(CONTROLLER_MUTATION_RATE, settings, clock)
        self._window_seconds = settings.samples * settings.window_ms / 1000.0
        self._clock = clock
        self._buckets: dict[SensorKey, TokenBucket] = {}
        self.enabled = False

    def update(self, client_quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self._resolver.update(client_quotas)
        self.enabled = self._resolver.enabled
        if not self.enabled:
            self._buckets.clear()

    def quota(self, user: str, client_id: str) -> tuple[float, SensorKey] | None:
        return self._resolver.quota(user, client_id)

    def new_quota(self, user: str, client_id: str, strict: bool) -> ControllerMutationQuota | None:
        """The quota of one request of (``user``, ``client_id``), None without a quota."""
        found = self._resolver.quota(user, client_id)
        if found is None:
            return None
        rate, sensor = found
        bucket = self._buckets.get(sensor)
        if bucket is None:
            bucket = self._buckets[sensor] = TokenBucket()
        return ControllerMutationQuota(
            bucket, rate, rate * self._window_seconds, strict, self._clock
        )
