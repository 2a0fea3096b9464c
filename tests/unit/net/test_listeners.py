"""A node's listeners: parsing, the control-plane listener a cluster broker adds, advertised
endpoints and the bootstrap address."""

from __future__ import annotations

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.net.listeners import Listener, NodeListeners, parse_listener

pytestmark = pytest.mark.timeout(10)


def test_listener_names_may_hold_underscores() -> None:
    assert parse_listener("control_plane://h:1") == Listener("CONTROL_PLANE", "h", 1)
    assert parse_listener("PLAINTEXT://[::1]:9092") == Listener("PLAINTEXT", "::1", 9092)
    with pytest.raises(ValueError, match="PLAINTEXT://host:port"):
        parse_listener("h:9092")


def test_the_control_plane_listener_binds_on_the_inter_broker_host() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092,REPLICATION://10.0.0.1:9093",
            "advertised.listeners": "PLAINTEXT://public:9092,REPLICATION://peers:9093",
        }
    )
    listeners = NodeListeners(config)
    listeners.add_control_plane("CONTROL_PLANE", "REPLICATION")
    assert listeners.listeners[-1] == Listener("CONTROL_PLANE", "10.0.0.1", 0)
    assert listeners.advertised[-1] == Listener("CONTROL_PLANE", "peers", 0)
    listeners.bound_ports.update({"PLAINTEXT": 9092, "REPLICATION": 9093, "CONTROL_PLANE": 40001})
    listeners.advertise_bound_ports()
    assert listeners.advertised_endpoint("CONTROL_PLANE") == ("peers", 40001)
    assert listeners.advertised_endpoint("PLAINTEXT") == ("public", 9092)
    assert listeners.bootstrap({"CONTROL_PLANE"}) == "0.0.0.0:9092"


def test_the_bootstrap_address_brackets_ipv6_and_skips_internal_listeners() -> None:
    config = BrokerConfig({"listeners": "CONTROLLER://127.0.0.1:9999,PLAINTEXT://[::1]:0"})
    listeners = NodeListeners(config)
    listeners.bound_ports.update({"CONTROLLER": 9999, "PLAINTEXT": 40002})
    assert listeners.bootstrap({"CONTROLLER"}) == "[::1]:40002"
    assert listeners.advertised_endpoint("PLAINTEXT") == ("::1", 40002)


def test_an_unknown_inter_broker_listener_is_refused() -> None:
    listeners = NodeListeners(BrokerConfig({"listeners": "PLAINTEXT://h:1"}))
    with pytest.raises(ValueError, match="not in listeners"):
        listeners.add_control_plane("CONTROL_PLANE", "REPLICATION")
