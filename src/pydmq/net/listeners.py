"""A node's listeners: what it binds (``listeners``), what it advertises
(``advertised.listeners``) and the ports it bound, by listener name.

The cluster-mode broker's control-plane listener (``control.plane.listener.name``, KIP-291)
is added here when ``listeners`` does not name it: opened on the inter-broker listener's host
at an ephemeral port, and advertised on the inter-broker listener's advertised host and the
bound port, so the controllers can reach it wherever the other brokers are reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pydmq.config.broker import BrokerConfig

__all__ = ["Listener", "NodeListeners", "parse_listener"]


@dataclass(frozen=True, slots=True)
class Listener:
    """A parsed listener URI: ``NAME://host:port``."""

    name: str
    host: str
    port: int


def parse_listener(uri: str) -> Listener:
    """``NAME://host:port``; names may hold ``_`` (``CONTROL_PLANE``), which URL schemes
    may not, so the name is split off before the address is parsed."""
    name, sep, address = uri.partition("://")
    parts = urlsplit(f"//{address}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if not (sep and name) or port is None:
        raise ValueError(f"listener {uri!r} must look like PLAINTEXT://host:port")
    return Listener(name.strip().upper(), parts.hostname or "", port)


class NodeListeners:
    """The listeners of one node (see the module docstring). Built by the node; the ports are
    recorded as the node binds them, on its event loop."""

    def __init__(self, config: BrokerConfig) -> None:
        self.listeners = [parse_listener(uri) for uri in config.listeners]
        self.advertised = [parse_listener(uri) for uri in config.advertised_listeners]
        self.bound_ports: dict[str, int] = {}

    def add_control_plane(self, name: str, inter_broker: str) -> None:
        """Bind and advertise the control-plane listener ``name`` (see the module docstring)."""
        if not any(item.name == name for item in self.listeners):
            bind = next((item for item in self.listeners if item.name == inter_broker), None)
            if bind is None:
                raise ValueError(f"inter.broker.listener.name {inter_broker} is not in listeners")
            self.listeners.append(Listener(name, bind.host, 0))
        if not any(item.name == name for item in self.advertised):
            bound = next(item for item in self.listeners if item.name == name)
            peers = next((a for a in self.advertised if a.name == inter_broker), bound)
            self.advertised.append(Listener(name, peers.host, bound.port))

    def advertise_bound_ports(self) -> None:
        """Once bound: an advertised port 0 becomes the port its listener bound."""
        if any(a.port == 0 for a in self.advertised):
            self.advertised = [
                Listener(a.name, a.host, a.port or self.bound_ports.get(a.name, 0))
                for a in self.advertised
            ]

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int]:
        """This node's endpoint on ``listener_name`` as clients reach it (the first advertised
        listener's for a name it does not advertise)."""
        for listener in self.advertised:
            if listener.name == listener_name:
                port = listener.port or self.bound_ports.get(listener.name, 0)
                if port == 0:
                    port = self.bound_ports.get(listener.name, 0)
                return listener.host or "127.0.0.1", port
        listener = self.advertised[0]
        return listener.host or "127.0.0.1", listener.port or self.bound_ports.get(listener.name, 0)

    def bootstrap(self, internal: set[str]) -> str:
        """``host:port`` of the first listener not in ``internal`` (IPv6 hosts in brackets)."""
        listener = next(
            (item for item in self.listeners if item.name not in internal),
            self.listeners[0],
        )
        host = listener.host or "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{self.bound_ports.get(listener.name, listener.port)}"
