"""SSL contexts from Kafka's ``ssl.*`` settings: one per SSL listener (the server side) and
one per SSL listener the node's own clients dial (inter-broker and controller traffic).

Server side: the key store (required), ``ssl.client.auth`` (required -> the client must
present a certificate the trust store trusts; requested -> it may; none), the trust store
(unset: the system's CAs, as Java's default trust store), ``ssl.enabled.protocols`` /
``ssl.protocol``, ``ssl.cipher.suites``. Client side: the same trust store, the key store when
there is one (mTLS), and ``ssl.endpoint.identification.algorithm=https`` as a host-name check.
The private key reaches OpenSSL through a private temporary file, encrypted with a one-time
password and removed at once (Python's ssl loads keys from files only). Built at start-up; a
bad setting is a ConfigError then, never a failure at the first connection.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.config.listener_security import security_protocol, ssl_settings
from pydmq.security.principal_mapping import SslPrincipalMapper
from pydmq.security.tls_keystore import KeyMaterial, load_keystore, load_truststore

__all__ = ["ServerTls", "client_ssl_context", "node_client_ssl", "node_server_tls", "server_tls"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
# IANA cipher-suite name pieces -> OpenSSL's (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 ->
# ECDHE-RSA-AES128-GCM-SHA256).
_BULK = {
    "AES_128_GCM": "AES128-GCM",
    "AES_256_GCM": "AES256-GCM",
    "AES_128_CBC": "AES128",
    "AES_256_CBC": "AES256",
    "CHACHA20_POLY1305": "CHACHA20-POLY1305",
}


@dataclass(frozen=True, slots=True)
class ServerTls:
    """What an SSL listener needs: its context and the rules naming a client certificate."""

    context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper


def server_tls(settings: Mapping[str, object], listener: str) -> ServerTls:
    """The server side of listener ``listener`` (settings: ``BrokerConfig.ssl_settings``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_ciphers(context, settings, listener)
    keystore = load_keystore(settings, listener)
    if keystore is None:
        raise ConfigError(
            f"listener {listener} is SSL but has no key store: set ssl.keystore.location "
            "(or ssl.keystore.key and ssl.keystore.certificate.chain)"
        )
    _install_keystore(context, keystore, listener)
    context.verify_mode = _CLIENT_AUTH[str(settings["ssl.client.auth"])]
    if context.verify_mode != ssl.CERT_NONE:
        _install_truststore(context, settings, listener)
    mapper = SslPrincipalMapper.from_rules(str(settings["ssl.principal.mapping.rules"]))
    return ServerTls(context, mapper)


def client_ssl_context(settings: Mapping[str, object], listener: str) -> ssl.SSLContext:
    """The context the node's own clients use to dial listener ``listener`` of a peer."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions_and_ciphers(context, settings, listener)
    context.check_hostname = settings["ssl.endpoint.identification.algorithm"] == "https"
    _install_truststore(context, settings, listener)
    keystore = load_keystore(settings, listener)
    if keystore is not None:
        _install_keystore(context, keystore, listener)
    return context


def node_client_ssl(config: BrokerConfig, listener: str) -> ssl.SSLContext | None:
    """The context this node's clients dial ``listener`` of the other nodes with (that
    listener's ssl.* settings, as Kafka's inter-broker client); None when it is not TLS."""
    if security_protocol(config, listener) not in ("SSL", "SASL_SSL"):
        return None
    return client_ssl_context(ssl_settings(config, listener), listener)


def node_server_tls(config: BrokerConfig, listener: str) -> ServerTls | None:
    """The server side of this node's listener ``listener`` (SSL, or SASL_SSL: the SASL
    exchange then runs inside TLS); None when it is neither."""
    if security_protocol(config, listener) not in ("SSL", "SASL_SSL"):
        return None
    return server_tls(ssl_settings(config, listener), listener)


def _versions_and_ciphers(
    context: ssl.SSLContext, settings: Mapping[str, object], listener: str
) -> None:
    enabled = settings["ssl.enabled.protocols"]
    assert isinstance(enabled, list)
    protocol = str(settings["ssl.protocol"])
    names = enabled or (list(_VERSIONS) if protocol == "TLS" else [protocol])
    versions = sorted(_VERSIONS[name] for name in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = settings["ssl.cipher.suites"]
    assert isinstance(suites, list)
    tls12 = [_openssl_cipher(name) for name in suites if not _is_tls13_suite(name)]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError as exc:
            raise ConfigError(
                f"listener {listener}: no usable cipher in ssl.cipher.suites {suites}"
            ) from exc


def _is_tls13_suite(name: str) -> bool:
    return name.startswith("TLS_") and "_WITH_" not in name


def _openssl_cipher(name: str) -> str:
    """OpenSSL's name of an IANA TLS 1.2 suite name; other names pass unchanged."""
    exchange, sep, rest = name.removeprefix("TLS_").partition("_WITH_")
    if not (sep and name.startswith("TLS_")):
        return name
    bulk = next((v for k, v in _BULK.items() if rest.startswith(k + "_")), None)
    if bulk is None:
        return name
    mac = rest.rpartition("_")[2]
    parts = [exchange.replace("_", "-"), bulk]
    if "CBC" in rest:
        parts.append("" if mac == "SHA" else mac)
    elif "GCM" in rest:
        parts.append(mac)
    # RSA key exchange is OpenSSL's bare name: TLS_RSA_WITH_AES_128_GCM_SHA256 = AES128-GCM-SHA256.
    if parts[0] == "RSA":
        parts = parts[1:]
    return "-".join(part for part in parts if part)


def _install_truststore(
    context: ssl.SSLContext, settings: Mapping[str, object], listener: str
) -> None:
    from cryptography.hazmat.primitives.serialization import Encoding

    certificates = load_truststore(settings, listener)
    if certificates is None:
        context.load_default_certs()
        return
    pem = "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
    context.load_verify_locations(cadata=pem)


def _install_keystore(context: ssl.SSLContext, material: KeyMaterial, listener: str) -> None:
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
    )

    password = secrets.token_hex(16)
    key = material.key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(password.encode())
    )
    chain = b"".join(c.public_bytes(Encoding.PEM) for c in material.chain)
    with tempfile.TemporaryDirectory(prefix="pydmq-tls-") as directory:
        path = Path(directory) / "keystore.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key + chain)
        try:
            context.load_cert_chain(path, password=password)
        except ssl.SSLError as exc:
            raise ConfigError(f"listener {listener}: OpenSSL refused the key store: {exc}") from exc
