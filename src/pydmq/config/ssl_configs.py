"""The ``ssl.*`` broker properties pydmq honours, with Kafka's names, types and defaults.

They configure every SSL and SASL_SSL listener; ``listener.name.<lower-case listener
name>.ssl.*`` overrides one listener's (see :meth:`pydmq.config.broker.BrokerConfig.ssl_settings`).
The node's own clients (inter-broker and controller traffic over an SSL listener) use the same
settings, as Kafka's broker does. Kafka can change some at run time; pydmq reads them at
start-up only, so they are read-only here. :mod:`pydmq.security.tls` builds the SSL contexts.
"""

from __future__ import annotations

import re

from pydmq.config.definitions import ConfigDef, ConfigType, list_of, one_of

__all__ = ["SSL_CONFIGS", "SSL_CONFIG_NAMES", "pop_listener_ssl"]

T = ConfigType


def _rules(value: object) -> str | None:
    from pydmq.security.principal_mapping import SslPrincipalMapper

    try:
        SslPrincipalMapper.from_rules(str(value))
    except ValueError as exc:
        return str(exc)
    return None


SSL_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "ssl.keystore.type",
        T.STRING,
        "JKS",
        "Format of the key store: PEM or PKCS12 (a JKS key store is read when it is in fact "
        "PKCS12, as Java does; a real JKS file is refused: convert it with keytool).",
        one_of("JKS", "PKCS12", "PEM"),
        read_only=True,
    ),
    ConfigDef(
        "ssl.keystore.location",
        T.STRING,
        None,
        "The key store file: PKCS12, or PEM holding the private key and the certificate chain.",
        read_only=True,
    ),
    ConfigDef(
        "ssl.keystore.password",
        T.PASSWORD,
        None,
        "Password of a PKCS12 key store.",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.key.password",
        T.PASSWORD,
        None,
        "Password of the private key (an encrypted PEM key; PKCS12: when it differs from the "
        "store's).",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.keystore.key",
        T.PASSWORD,
        None,
        "The private key in PEM, inline (ssl.keystore.type=PEM).",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.keystore.certificate.chain",
        T.PASSWORD,
        None,
        "The certificate chain in PEM, inline (ssl.keystore.type=PEM).",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.truststore.type",
        T.STRING,
        "JKS",
        "Format of the trust store: PEM or PKCS12 (JKS as for ssl.keystore.type).",
        one_of("JKS", "PKCS12", "PEM"),
        read_only=True,
    ),
    ConfigDef(
        "ssl.truststore.location",
        T.STRING,
        None,
        "The trust store file (PEM certificates or PKCS12); unset: the system's CAs.",
        read_only=True,
    ),
    ConfigDef(
        "ssl.truststore.password",
        T.PASSWORD,
        None,
        "Password of a PKCS12 trust store.",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.truststore.certificates",
        T.PASSWORD,
        None,
        "Trusted certificates in PEM, inline (ssl.truststore.type=PEM).",
        read_only=True,
        sensitive=True,
    ),
    ConfigDef(
        "ssl.client.auth",
        T.STRING,
        "none",
        "required: a client must present a certificate the trust store trusts; requested: "
        "one is asked for but not needed; none.",
        one_of("required", "requested", "none"),
        read_only=True,
    ),
    ConfigDef(
        "ssl.enabled.protocols",
        T.LIST,
        ["TLSv1.2", "TLSv1.3"],
        "TLS versions a connection may use.",
        list_of("TLSv1.2", "TLSv1.3"),
        read_only=True,
    ),
    ConfigDef(
        "ssl.protocol",
        T.STRING,
        "TLSv1.3",
        "The TLS protocol of the SSL context; used when ssl.enabled.protocols is empty "
        "(TLS: both versions).",
        one_of("TLSv1.2", "TLSv1.3", "TLS"),
        read_only=True,
    ),
    ConfigDef(
        "ssl.cipher.suites",
        T.LIST,
        [],
        "TLS 1.2 cipher suites (IANA names as Kafka's, or OpenSSL's); empty: OpenSSL's "
        "defaults. TLS 1.3 suites are always OpenSSL's.",
        read_only=True,
    ),
    ConfigDef(
        "ssl.endpoint.identification.algorithm",
        T.STRING,
        "https",
        "https: the node's own clients check that a peer's certificate names the host they "
        "dialled; empty: they do not.",
        one_of("https", ""),
        read_only=True,
    ),
    ConfigDef(
        "ssl.principal.mapping.rules",
        T.STRING,
        "DEFAULT",
        "Rules from a client certificate's subject DN to its principal name "
        "(RULE:pattern/replacement/[LU], DEFAULT).",
        _rules,
        read_only=True,
    ),
)

SSL_CONFIG_NAMES = frozenset(d.name for d in SSL_CONFIGS)
_BY_NAME = {d.name: d for d in SSL_CONFIGS}
# listener.name.<lower-case listener name>.ssl.<...>: one listener's ssl.* setting.
_LISTENER_SSL = re.compile(r"^listener\.name\.([a-z0-9_.-]+?)\.(ssl\..+)$")


def pop_listener_ssl(values: dict[str, object]) -> dict[str, dict[str, object]]:
    """Take every ``listener.name.<name>.ssl.*`` property pydmq honours out of ``values``;
    returns listener name (lower case, as in Kafka's prefix) -> its parsed ssl.* values."""
    out: dict[str, dict[str, object]] = {}
    for name in list(values):
        match = _LISTENER_SSL.match(name)
        if match is not None and match.group(2) in _BY_NAME:
            listener, prop = match.groups()
            out.setdefault(listener, {})[prop] = _BY_NAME[prop].parse(values.pop(name))
    return out
