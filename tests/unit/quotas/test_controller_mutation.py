"""Kafka's controller mutation quota (KIP-599): a token bucket of ``quota * samples * window``
tokens, strict requests refused once it is empty, throttle ``-tokens / quota`` seconds."""

from __future__ import annotations

import pytest

from pydmq.metadata.image import quota_entity
from pydmq.quotas.controller_mutation import ControllerMutationQuotaManager, TokenBucket
from pydmq.quotas.manager import QuotaSettings

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _manager(rate: float, clock: Clock) -> ControllerMutationQuotaManager:
    manager = ControllerMutationQuotaManager(QuotaSettings(), clock)
    manager.update({quota_entity([("client-id", "admin")]): {"controller_mutation_rate": rate}})
    return manager


def test_the_bucket_starts_full_refills_at_the_rate_and_caps_at_the_burst() -> None:
    bucket = TokenBucket()
    assert bucket.refill(2.0, 22.0, 0) == 22.0
    bucket.record(30, 2.0, 22.0, 0)
    assert bucket.tokens == -8.0
    assert bucket.refill(2.0, 22.0, 1_500) == -5.0
    assert bucket.refill(2.0, 22.0, 100_000) == 22.0


def test_a_strict_request_is_refused_once_the_bucket_is_negative() -> None:
    clock = Clock()
    manager = _manager(1.0, clock)  # burst: 1 * 11 * 1 s = 11 partitions
    quota = manager.new_quota("u", "admin", strict=True)
    assert quota is not None
    assert quota.record(10)  # 11 -> 1
    assert quota.record(10)  # 1 -> -9: accepted, the bucket was not empty
    assert quota.throttle_time_ms == 0
    assert not quota.record(10)  # refused
    assert quota.throttle_time_ms == 9000  # -(-9) / 1 * 1000
    clock.now += 4_000
    later = manager.new_quota("u", "admin", strict=True)
    assert later is not None and not later.record(1)
    assert later.throttle_time_ms == 5000
    clock.now += 5_000
    assert later.record(1)


def test_a_permissive_request_is_accepted_and_throttled() -> None:
    manager = _manager(1.0, Clock())
    quota = manager.new_quota("u", "admin", strict=False)
    assert quota is not None
    assert quota.record(10) and quota.record(10) and quota.record(10)
    assert quota.throttle_time_ms == 19_000


def test_no_quota_no_bucket() -> None:
    manager = _manager(1.0, Clock())
    assert manager.new_quota("u", "other", strict=True) is None
    manager.update({})
    assert not manager.enabled
