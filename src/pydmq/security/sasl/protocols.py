"""Which listeners authenticate with SASL: the one check the node makes at start-up before it
imports anything else of :mod:`pydmq.security.sasl` (a node without SASL listeners never
does)."""

from __future__ import annotations

from pydmq.config.broker import BrokerConfig

__all__ = ["SASL_PROTOCOLS", "is_sasl_listener"]

SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def is_sasl_listener(config: BrokerConfig, listener: str) -> bool:
    """Whether ``listener``'s security protocol (``listener.security.protocol.map``, else the
    name itself when it is a protocol's) is SASL_PLAINTEXT or SASL_SSL."""
    protocol = config.listener_security_protocols().get(listener, listener)
    return protocol in SASL_PROTOCOLS
