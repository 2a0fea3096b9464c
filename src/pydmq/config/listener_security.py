"""Which security protocol a listener speaks, and the ssl.* settings of an SSL listener.

``listener.security.protocol.map`` names each listener's protocol; a listener it does not
name speaks the protocol whose name it bears (a listener called SSL speaks SSL), else
PLAINTEXT, as Kafka's default map says. ``listener.name.<lower-case name>.ssl.*`` overrides
the node's ``ssl.*`` for one listener. Pure functions over a :class:`BrokerConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydmq.config.definitions import ConfigError
from pydmq.config.ssl_configs import SSL_CONFIG_NAMES

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig

__all__ = ["SECURITY_PROTOCOLS", "check_listener_security", "security_protocol", "ssl_settings"]

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


def security_protocol(config: BrokerConfig | Mapping[str, str], name: str) -> str:
    """The security protocol of listener ``name`` (of a config, or of a listener -> protocol
    mapping being built)."""
    mapping = config if isinstance(config, Mapping) else config.listener_security_protocols()
    return mapping.get(name, name if name in SECURITY_PROTOCOLS else "PLAINTEXT")


def check_listener_security(config: BrokerConfig, listener_names: list[str]) -> None:
    """Refuse (ConfigError) a listener whose security protocol is none of Kafka's four
    (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), all of which pydmq serves."""
    for name in listener_names:
        protocol = security_protocol(config, name)
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener {name} uses security protocol {protocol}: not one of "
                f"{', '.join(sorted(SECURITY_PROTOCOLS))}"
            )


def ssl_settings(config: BrokerConfig, listener_name: str) -> dict[str, object]:
    """Every ssl.* value of ``listener_name``: its ``listener.name.<name>.ssl.*`` overrides
    over the node's ``ssl.*`` settings (Kafka's precedence)."""
    own = config.listener_ssl.get(listener_name.lower(), {})
    return {name: own.get(name, config.get(name)) for name in SSL_CONFIG_NAMES}
