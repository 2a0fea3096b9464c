"""The SASL broker properties pydmq honours, with Kafka's names, and the listener-prefixed
forms Kafka accepts for them (``listener.name.<listener>.sasl.enabled.mechanisms``,
``listener.name.<listener>.<mechanism>.sasl.jaas.config``,
``listener.name.<listener>[.<mechanism>].connections.max.reauth.ms``). Pure data."""

from __future__ import annotations

import re
from collections.abc import MutableMapping

from pydmq.config.definitions import ConfigDef, at_least
from pydmq.config.definitions import ConfigType as T

__all__ = ["SASL_CONFIGS", "SASL_CONFIG_NAMES", "pop_listener_sasl"]

SASL_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "sasl.enabled.mechanisms",
        T.LIST,
        ["GSSAPI"],
        "SASL mechanisms a SASL listener accepts (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
        "OAUTHBEARER; GSSAPI is not supported).",
        read_only=True,
    ),
    ConfigDef(
        "sasl.jaas.config",
        T.PASSWORD,
        None,
        "JAAS login entry of the SASL listeners (PlainLoginModule users, the node's own "
        "credentials as a client of the other nodes, OAUTHBEARER validator options).",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        T.LONG,
        0,
        "Longest SASL session before the client must re-authenticate (KIP-368); 0: no limit.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "connection.failed.authentication.delay.ms",
        T.INT,
        100,
        "How long a connection whose authentication failed stays open (unread) after its "
        "answer, so that a client retrying at once is slowed down.",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "sasl.server.max.receive.size",
        T.INT,
        524288,
        "Largest request a SASL listener's connection may send before its first "
        "authentication completes (a larger one closes the connection).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "sasl.mechanism.inter.broker.protocol",
        T.STRING,
        "GSSAPI",
        "SASL mechanism a broker uses towards the other brokers' SASL listeners.",
        read_only=True,
    ),
    ConfigDef(
        "pydmq.sasl.oauthbearer.validator",
        T.STRING,
        "unsecured",
        "The OAUTHBEARER token validator, by the name a plugin registers it under "
        "(pydmq_register_oauthbearer_validators); unsecured: Kafka's unsecured JWS validator.",
        read_only=True,
    ),
    ConfigDef(
        "sasl.mechanism.controller.protocol",
        T.STRING,
        "GSSAPI",
        "SASL mechanism a node uses towards the controllers' SASL listeners.",
        read_only=True,
    ),
)
SASL_CONFIG_NAMES = frozenset(d.name for d in SASL_CONFIGS)

# listener.name.<listener>.sasl.enabled.mechanisms, ...<listener>.<mechanism>.sasl.jaas.config,
# ...<listener>[.<mechanism>].connections.max.reauth.ms: (listener, property) groups.
_LISTENER_SASL = re.compile(
    r"^listener\.name\.([a-z0-9_-]+)\."
    r"(sasl\.enabled\.mechanisms|(?:[a-z0-9-]+\.)?sasl\.jaas\.config"
    r"|(?:[a-z0-9-]+\.)?connections\.max\.reauth\.ms)$"
)


def pop_listener_sasl(values: MutableMapping[str, object]) -> dict[str, dict[str, str]]:
    """Take the listener-prefixed SASL properties out of ``values``: listener name (lower
    case, as in the prefix) -> {property after the prefix: value}."""
    out: dict[str, dict[str, str]] = {}
    for name in [n for n in values if _LISTENER_SASL.match(n)]:
        match = _LISTENER_SASL.match(name)
        assert match is not None
        out.setdefault(match[1], {})[match[2]] = str(values.pop(name))
    return out
