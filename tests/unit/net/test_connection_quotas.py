"""ConnectionQuotas: Kafka's max.connections and max.connections.per.ip, and pydmq's cap from
RLIMIT_NOFILE."""

from __future__ import annotations

import resource

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.net.connection_quotas import (
    MIN_CONNECTIONS,
    RESERVED_DESCRIPTORS,
    ConnectionLimits,
    ConnectionQuotas,
    descriptor_budget,
    limits_from_config,
)


def test_per_address_limit_with_overrides() -> None:
    limits = ConnectionLimits(max_per_ip=2, ip_overrides={"10.0.0.9": 3})
    quotas = ConnectionQuotas(lambda: limits)
    assert quotas.admit(1, "PLAINTEXT", "10.0.0.1") is None
    assert quotas.admit(2, "PLAINTEXT", "10.0.0.1") is None
    refusal = quotas.admit(3, "PLAINTEXT", "10.0.0.1")
    assert refusal is not None and "max.connections.per.ip" in refusal
    assert [quotas.admit(i, "PLAINTEXT", "10.0.0.9") for i in (4, 5, 6)] == [None] * 3
    assert quotas.admit(7, "PLAINTEXT", "10.0.0.9") is not None
    quotas.release(1)
    assert quotas.admit(8, "PLAINTEXT", "10.0.0.1") is None
    quotas.release(3)  # never admitted: nothing to forget
    assert quotas.open_connections == 5 and quotas.refused == 2


def test_all_listeners_limit_spares_the_nodes_own_listeners() -> None:
    quotas = ConnectionQuotas(lambda: ConnectionLimits(max_connections=2), {"REPLICATION"})
    assert quotas.admit(1, "PLAINTEXT", "a") is None
    assert quotas.admit(2, "PLAINTEXT", "b") is None
    refusal = quotas.admit(3, "PLAINTEXT", "c")
    assert refusal is not None and "max.connections" in refusal
    assert quotas.admit(4, "REPLICATION", "d") is None  # the other nodes still get in
    quotas.release(4)
    quotas.release(2)
    assert quotas.admit(5, "PLAINTEXT", "c") is None


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
