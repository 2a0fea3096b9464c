"""ClientQuotaManager: Kafka's entity precedence, the sensors quotas are measured on, and
the throttle time of a client over its quota."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pydmq.metadata.image import QuotaEntity, quota_entity
from pydmq.quotas.manager import ClientQuotaManager, QuotaManagers, QuotaSettings

pytestmark = pytest.mark.timeout(30)

KEY = "producer_byte_rate"
U, C = "user", "client-id"


def _quotas(
    *entries: tuple[dict[str, str | None], float],
) -> dict[QuotaEntity, Mapping[str, float]]:
    return {quota_entity(entity.items()): {KEY: value} for entity, value in entries}


# Kafka's documented order, most precise first; each level's value is its rank.
LEVELS: list[dict[str, str | None]] = [
    {U: "alice", C: "app"},
    {U: "alice", C: None},
    {U: "alice"},
    {U: None, C: "app"},
    {U: None, C: None},
    {U: None},
    {C: "app"},
    {C: None},
]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_most_precise_configured_entity_wins(first: int) -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(*[(LEVELS[i], float(i + 1)) for i in range(first, len(LEVELS))]))
    found = manager.quota("alice", "app")
    assert found is not None
    assert found[0] == float(first + 1)


def test_no_matching_entity_means_no_quota() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(({U: "bob"}, 10.0), ({C: "other"}, 10.0), ({U: "bob", C: None}, 1.0)))
    assert manager.enabled
    assert manager.quota("alice", "app") is None
    assert manager.record_and_get_throttle_time_ms("alice", "app", 10**9, 0) == 0


def test_other_keys_do_not_enable_the_manager() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update({quota_entity([(U, None)]): {"consumer_byte_rate": 5.0}})
    assert not manager.enabled


@pytest.mark.parametrize(
    ("entity", "sensor"),
    [
        ({U: "alice", C: "app"}, ("alice", "app")),
        ({U: "alice", C: None}, ("alice", "app")),
        ({U: "alice"}, ("alice", "")),
        ({U: None, C: "app"}, ("alice", "app")),
        ({U: None, C: None}, ("alice", "app")),
        ({U: None}, ("alice", "")),
        ({C: "app"}, ("", "app")),
        ({C: None}, ("", "app")),
    ],
)
def test_the_sensor_has_kafkas_metric_tags(
    entity: dict[str, str | None], sensor: tuple[str, str]
) -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas((entity, 100.0)))
    assert manager.quota("alice", "app") == (100.0, sensor)


def test_clients_under_a_default_client_quota_are_measured_apart() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(({C: None}, 100.0)))
    # 1000 B at creation: 100 B/s over the 10 s minimum window, exactly the quota.
    assert manager.record_and_get_throttle_time_ms("u", "a", 1000, 0) == 0
    assert manager.record_and_get_throttle_time_ms("u", "b", 1000, 0) == 0
    # a's second 1000 B: 200 B/s -> (200 - 100) / 100 * 10000 = 10000 ms
    assert manager.record_and_get_throttle_time_ms("u", "a", 1000, 0) == 10_000


def test_clients_of_one_user_share_a_user_quota() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(({U: "alice"}, 100.0)))
    assert manager.record_and_get_throttle_time_ms("alice", "a", 1000, 0) == 0
    assert manager.record_and_get_throttle_time_ms("alice", "b", 1000, 0) == 10_000


def test_a_changed_quota_applies_to_the_next_request() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(({C: "app"}, 100.0)))
    assert manager.record_and_get_throttle_time_ms("u", "app", 2000, 0) == 10_000
    manager.update(_quotas(({C: "app"}, 1000.0)))
    assert manager.record_and_get_throttle_time_ms("u", "app", 0, 0) == 0
    manager.update({})
    assert not manager.enabled
    assert manager.quota("u", "app") is None


def test_the_quota_window_is_the_configured_one() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings(samples=5, window_seconds=2))
    manager.update(_quotas(({C: "app"}, 100.0)))
    # minimum window: 4 whole windows of 2 s = 8 s; 1600 B -> 200 B/s -> 8000 ms
    assert manager.record_and_get_throttle_time_ms("u", "app", 1600, 0) == 8000
    assert manager.max_value_in_quota_window("u", "app") == 100.0 * 4 * 2


def test_fetch_unrecord_takes_the_empty_response_back() -> None:
    manager = ClientQuotaManager("consumer_byte_rate", QuotaSettings())
    manager.update({quota_entity([(C, "app")]): {"consumer_byte_rate": 100.0}})
    assert manager.record_and_get_throttle_time_ms("u", "app", 5000, 0) > 0
    manager.unrecord("u", "app", 5000, 0)
    assert manager.record_and_get_throttle_time_ms("u", "app", 1000, 0) == 0


def test_the_broker_set_updates_every_key() -> None:
    managers = QuotaManagers(QuotaSettings())
    quotas = {
        quota_entity([(U, "alice")]): {
            "producer_byte_rate": 1.0,
            "consumer_byte_rate": 2.0,
            "request_percentage": 3.0,
            "controller_mutation_rate": 4.0,
        }
    }
    managers.update(quotas)
    assert managers.client_quotas == quotas
    for manager, value in (
        (managers.produce, 1.0),
        (managers.fetch, 2.0),
        (managers.request, 3.0),
        (managers.controller_mutation, 4.0),
    ):
        assert manager.quota("alice", "x") == (value, ("alice", ""))


def test_clients_before_kip_219_get_a_delayed_answer_instead() -> None:
    from pydmq.quotas.throttling import client_throttles

    assert not client_throttles(0, 5) and client_throttles(0, 6)  # Produce
    assert not client_throttles(1, 7) and client_throttles(1, 8)  # Fetch
    assert client_throttles(48, 0)  # DescribeClientQuotas: newer than the KIP


def test_sensors_unused_for_an_hour_are_dropped() -> None:
    manager = ClientQuotaManager(KEY, QuotaSettings())
    manager.update(_quotas(({C: None}, 1e9)))
    for i in range(1023):
        manager.record_and_get_throttle_time_ms("u", f"short-lived-{i}", 1, 0)
    manager.record_and_get_throttle_time_ms("u", "recent", 1, 3_000_000)
    assert manager.sensor_count == 1024
    # an hour after the first ones, the next new sensor triggers the check
    manager.record_and_get_throttle_time_ms("u", "new", 1, 3_600_000)
    assert manager.sensor_count == 2  # "recent" and "new"
