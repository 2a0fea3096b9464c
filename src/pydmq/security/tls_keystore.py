"""Key stores and trust stores as Kafka names them, read into ``cryptography`` objects.

``ssl.keystore.type`` PEM (``ssl.keystore.location``: one file with the private key and the
certificate chain; or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; an
encrypted key's password in ``ssl.key.password``) or PKCS12 (``ssl.keystore.password``); JKS,
Kafka's default type, is read when the file is in fact PKCS12, as Java reads it. Trust stores
likewise (``ssl.truststore.location`` / ``ssl.truststore.certificates``). Every failure is a
ConfigError naming the property. Called once per listener at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydmq.config.definitions import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.x509 import Certificate

__all__ = ["KeyMaterial", "load_keystore", "load_truststore"]


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its certificate chain (the key's certificate first)."""

    key: PrivateKeyTypes
    chain: list[Certificate]


def load_keystore(settings: Mapping[str, object], listener: str) -> KeyMaterial | None:
    """The key store the settings name; None when they name none."""
    kind = str(settings["ssl.keystore.type"])
    location = _opt(settings, "ssl.keystore.location")
    inline_key = _opt(settings, "ssl.keystore.key")
    inline_chain = _opt(settings, "ssl.keystore.certificate.chain")
    key_password = _opt(settings, "ssl.key.password")
    if inline_key is not None or inline_chain is not None:
        if kind != "PEM":
            raise ConfigError(
                f"listener {listener}: ssl.keystore.key and ssl.keystore.certificate.chain "
                "need ssl.keystore.type=PEM"
            )
        if location is not None or inline_key is None or inline_chain is None:
            raise ConfigError(
                f"listener {listener}: set both ssl.keystore.key and "
                "ssl.keystore.certificate.chain, and not ssl.keystore.location"
            )
        return _pem_keystore(
            inline_key.encode(), inline_chain.encode(), key_password, listener, "ssl.keystore.key"
        )
    if location is None:
        return None
    data = _read(location, "ssl.keystore.location", listener)
    if kind == "PEM":
        return _pem_keystore(data, data, key_password, listener, location)
    store_password = _opt(settings, "ssl.keystore.password")
    key, certificate, extra = _pkcs12(data, store_password, key_password, kind, listener)
    if key is None or certificate is None:
        raise ConfigError(f"listener {listener}: key store {location} holds no private key")
    return _checked(KeyMaterial(key, [certificate, *extra]), listener, location)


def load_truststore(settings: Mapping[str, object], listener: str) -> list[Certificate] | None:
    """The trusted certificates the settings name; None when they name none (the system's)."""
    from cryptography import x509

    kind = str(settings["ssl.truststore.type"])
    location = _opt(settings, "ssl.truststore.location")
    inline = _opt(settings, "ssl.truststore.certificates")
    if inline is not None:
        if kind != "PEM" or location is not None:
            raise ConfigError(
                f"listener {listener}: ssl.truststore.certificates needs "
                "ssl.truststore.type=PEM and no ssl.truststore.location"
            )
        data = inline.encode()
        source = "ssl.truststore.certificates"
    elif location is not None:
        data = _read(location, "ssl.truststore.location", listener)
        source = location
    else:
        return None
    if kind == "PEM":
        try:
            certificates = x509.load_pem_x509_certificates(data)
        except ValueError as exc:
            raise ConfigError(
                f"listener {listener}: no PEM certificate in {source}: {exc}"
            ) from exc
        return certificates
    password = _opt(settings, "ssl.truststore.password")
    _, certificate, extra = _pkcs12(data, password, None, kind, listener)
    certificates = [*([certificate] if certificate is not None else []), *extra]
    if not certificates:
        raise ConfigError(f"listener {listener}: trust store {source} holds no certificate")
    return certificates


def _opt(settings: Mapping[str, object], name: str) -> str | None:
    value = settings.get(name)
    return None if value is None or value == "" else str(value)


def _read(location: str, name: str, listener: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise ConfigError(f"listener {listener}: cannot read {name} {location}: {exc}") from exc


def _pem_keystore(
    key_data: bytes, chain_data: bytes, password: str | None, listener: str, source: str
) -> KeyMaterial:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(key_data, None if password is None else password.encode())
    except TypeError as exc:  # encrypted without a password, or a password for a plain key
        raise ConfigError(f"listener {listener}: {source}: {exc} (ssl.key.password)") from exc
    except ValueError as exc:
        raise ConfigError(
            f"listener {listener}: {source}: no readable private key (wrong ssl.key.password, "
            f"or not PEM): {exc}"
        ) from exc
    try:
        chain = x509.load_pem_x509_certificates(chain_data)
    except ValueError as exc:
        raise ConfigError(f"listener {listener}: no PEM certificate chain in {source}") from exc
    return _checked(KeyMaterial(key, chain), listener, source)


def _pkcs12(
    data: bytes, store_password: str | None, key_password: str | None, kind: str, listener: str
) -> tuple[PrivateKeyTypes | None, Certificate | None, list[Certificate]]:
    from cryptography.hazmat.primitives.serialization import pkcs12

    tries: list[str | None] = [p for p in (store_password, key_password) if p is not None] or [
        None,
        "",
    ]
    error: Exception | None = None
    for password in tries:
        try:
            key, certificate, extra = pkcs12.load_key_and_certificates(
                data, None if password is None else password.encode()
            )
        except ValueError as exc:
            error = exc
            continue
        return key, certificate, list(extra)
    if kind == "JKS":
        raise ConfigError(
            f"listener {listener}: a JKS store cannot be read; convert it to PKCS12 "
            "(keytool -importkeystore -deststoretype PKCS12) or PEM, and set the type"
        ) from error
    raise ConfigError(
        f"listener {listener}: cannot open the PKCS12 store (wrong password, or not PKCS12): "
        f"{error}"
    ) from error


def _checked(material: KeyMaterial, listener: str, source: str) -> KeyMaterial:
    """Refuse a key whose public key is not the first certificate's."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    def spki(public: object) -> bytes:
        return public.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined,no-any-return]

    if spki(material.key.public_key()) != spki(material.chain[0].public_key()):
        raise ConfigError(
            f"listener {listener}: the private key in {source} does not match its certificate "
            f"({material.chain[0].subject.rfc4514_string()})"
        )
    return material
