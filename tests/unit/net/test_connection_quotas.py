"""ConnectionQuotas: Kafka's max.connections, max.connections.per.ip and a listener's own
max.connections, pydmq's cap from RLIMIT_NOFILE, and the creation rates (KIP-612): all
listeners', one listener's (delays) and an address's quota (a delayed close)."""

from __future__ import annotations

import resource

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.connection_quotas import UNLIMITED, ListenerLimits
from pydmq.config.definitions import ConfigError
from pydmq.metadata.image import quota_entity
from pydmq.net.connection_quotas import (
    MIN_CONNECTIONS,
    RESERVED_DESCRIPTORS,
    Admission,
    ConnectionLimits,
    ConnectionQuotas,
    descriptor_budget,
    ip_connection_rates,
    limits_from_config,
)
from pydmq.net.connection_rates import ConnectionCreationRates


def admit(
    quotas: ConnectionQuotas, connection_id: int, listener: str, host: str, now_ms: int = 0
) -> Admission | None:
    return quotas.admit(connection_id, listener, host, now_ms)


def test_per_address_limit_with_overrides() -> None:
    limits = ConnectionLimits(max_per_ip=2, ip_overrides={"10.0.0.9": 3})
    quotas = ConnectionQuotas(lambda: limits)
    assert admit(quotas, 1, "PLAINTEXT", "10.0.0.1") is None
    assert admit(quotas, 2, "PLAINTEXT", "10.0.0.1") is None
    refusal = admit(quotas, 3, "PLAINTEXT", "10.0.0.1")
    assert refusal is not None and "max.connections.per.ip" in str(refusal.refusal)
    assert [admit(quotas, i, "PLAINTEXT", "10.0.0.9") for i in (4, 5, 6)] == [None] * 3
    assert admit(quotas, 7, "PLAINTEXT", "10.0.0.9") is not None
    quotas.release(1)
    assert admit(quotas, 8, "PLAINTEXT", "10.0.0.1") is None
    quotas.release(3)  # never admitted: nothing to forget
    assert quotas.open_connections == 5 and quotas.refused == 2


def test_all_listeners_limit_spares_the_nodes_own_listeners() -> None:
    quotas = ConnectionQuotas(lambda: ConnectionLimits(max_connections=2), {"REPLICATION"})
    assert admit(quotas, 1, "PLAINTEXT", "a") is None
    assert admit(quotas, 2, "PLAINTEXT", "b") is None
    refusal = admit(quotas, 3, "PLAINTEXT", "c")
    assert refusal is not None and "max.connections" in str(refusal.refusal)
    assert admit(quotas, 4, "REPLICATION", "d") is None  # the other nodes still get in
    quotas.release(4)
    quotas.release(2)
    assert admit(quotas, 5, "PLAINTEXT", "c") is None


def test_limits_follow_the_config_and_the_descriptor_share() -> None:
    config = BrokerConfig(
        {"max.connections": 50, "max.connections.per.ip.overrides": "1.2.3.4:7, host-a:9"}
    )
    limits = limits_from_config(config, descriptors=30)
    assert limits.max_connections == 30  # the descriptors the storage engine leaves
    assert limits.for_ip("1.2.3.4") == 7 and limits.for_ip("host-a") == 9
    assert limits.for_ip("5.6.7.8") == 2**31 - 1
    assert limits_from_config(config, descriptors=1000).max_connections == 50
    with pytest.raises(ConfigError):
        BrokerConfig({"max.connections.per.ip.overrides": "1.2.3.4"})


def test_descriptor_budget_is_what_storage_and_the_reserve_leave() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        assert descriptor_budget(0.5) == 512 - RESERVED_DESCRIPTORS
        assert descriptor_budget(0.9) == MIN_CONNECTIONS  # never fewer
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_listeners_own_limit() -> None:
    limits = ConnectionLimits(listeners={"external": ListenerLimits(max_connections=1)})
    quotas = ConnectionQuotas(lambda: limits)
    assert admit(quotas, 1, "EXTERNAL", "a") is None
    refusal = admit(quotas, 2, "EXTERNAL", "b")
    assert refusal is not None
    assert "listener.name.external.max.connections" in str(refusal.refusal)
    assert admit(quotas, 3, "PLAINTEXT", "b") is None  # other listeners are not counted
    quotas.release(1)
    assert admit(quotas, 4, "EXTERNAL", "b") is None


def test_listener_limits_from_server_properties() -> None:
    config = BrokerConfig(
        {
            "listener.name.external.max.connections": "5",
            "listener.name.external.max.connection.creation.rate": "3",
            "max.connection.creation.rate": "100",
        }
    )
    assert config.listener_limits == {"external": ListenerLimits(5, 3)}
    assert "listener.name.external.max.connections" not in config.without_effect
    limits = limits_from_config(config, 1000, config.listener_limits)
    assert limits.for_listener("EXTERNAL") == ListenerLimits(5, 3)
    assert limits.for_listener("PLAINTEXT") == ListenerLimits()
    assert limits.max_creation_rate == 100
    with pytest.raises(ConfigError):
        BrokerConfig({"listener.name.external.max.connections": "-1"})


def _rated(limits: ConnectionLimits, exempt: set[str] | None = None) -> ConnectionQuotas:
    # Kafka's windows: 11 samples of 1 s; a rate counts at least 10 whole windows.
    return ConnectionQuotas(
        lambda: limits, exempt or set(), ConnectionCreationRates(11, 1000, exempt or set())
    )


def test_over_the_all_listeners_rate_connections_wait_their_turns_in_order() -> None:
    quotas = _rated(ConnectionLimits(max_creation_rate=2), {"REPLICATION"})
    # 2/s over at least 10 s: 20 connections at once are within it, the 21st is not.
    assert [admit(quotas, i, "PLAINTEXT", f"h{i}") for i in range(20)] == [None] * 20
    first = admit(quotas, 20, "PLAINTEXT", "h")
    second = admit(quotas, 21, "PLAINTEXT", "h")
    assert first is not None and first.refusal is None and first.delay_ms > 0
    assert second is not None and second.refusal is None
    assert second.delay_ms > first.delay_ms  # queued behind it, as Kafka's acceptor is
    assert first.delay_ms <= 1000 and second.delay_ms <= 2000  # at most a window each
    assert admit(quotas, 22, "REPLICATION", "h") is None  # the nodes' listener is exempt
    assert quotas.open_connections == 23 and quotas.delayed == 2 and quotas.refused == 0
    # Much later the rate has fallen: served at once again.
    assert admit(quotas, 23, "PLAINTEXT", "h", now_ms=60_000) is None


def test_a_listeners_own_rate_applies_to_exempt_listeners_too() -> None:
    limits = ConnectionLimits(
        listeners={"replication": ListenerLimits(max_connection_creation_rate=1)}
    )
    quotas = _rated(limits, {"REPLICATION"})
    assert [admit(quotas, i, "REPLICATION", "n") for i in range(10)] == [None] * 10
    delayed = admit(quotas, 10, "REPLICATION", "n")
    assert delayed is not None and delayed.delay_ms > 0
    assert admit(quotas, 11, "PLAINTEXT", "c") is None  # another listener is not delayed


def test_an_address_over_its_quota_is_closed_late_and_not_counted() -> None:
    rates = ip_connection_rates(
        {
            quota_entity([("ip", "10.0.0.1")]): {"connection_creation_rate": 1.0},
            quota_entity([("ip", None)]): {"connection_creation_rate": 5.0},
            quota_entity([("user", "alice")]): {"producer_byte_rate": 1024.0},
        }
    )
    assert rates == {"10.0.0.1": 1, None: 5}
    quotas = _rated(ConnectionLimits(ip_rates=rates), {"REPLICATION"})
    assert [admit(quotas, i, "PLAINTEXT", "10.0.0.1") for i in range(10)] == [None] * 10
    refused = admit(quotas, 10, "PLAINTEXT", "10.0.0.1")
    assert refused is not None and "connection_creation_rate" in str(refused.refusal)
    assert 0 < refused.delay_ms <= 1000  # closed after its throttle time
    # Not counted: once the rate has fallen, the address is admitted again.
    assert admit(quotas, 11, "PLAINTEXT", "10.0.0.1", now_ms=11_000) is None
    # Another address has the default quota (5/s: 50 at once), the nodes' listener none.
    assert [admit(quotas, 100 + i, "PLAINTEXT", "10.0.0.2") for i in range(50)] == [None] * 50
    assert admit(quotas, 150, "PLAINTEXT", "10.0.0.2") is not None
    assert admit(quotas, 151, "REPLICATION", "10.0.0.1") is None
    assert ConnectionLimits().ip_rate("10.0.0.1") == UNLIMITED
