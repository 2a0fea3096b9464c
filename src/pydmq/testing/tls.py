"""Throwaway certificates for tests and benchmarks of SSL listeners: a CA, and leaf
certificates it signs (a server's for 127.0.0.1/localhost, a client's with a chosen subject),
written as PEM and PKCS12 files into a directory.

Not for production: short keys (EC P-256), one-day validity by default, passwords in the
clear.
Used from the test thread.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Identity", "TestCA"]

PASSWORD = "test-secret"


@dataclass(frozen=True, slots=True)
class Identity:
    """One leaf's files: ``pem`` (key and chain in one file), ``key_pem`` / ``cert_pem``
    (separate), ``p12`` (PKCS12 under :data:`PASSWORD`), and ``encrypted_pem`` (the key
    encrypted under :data:`PASSWORD`, then the chain)."""

    pem: Path
    key_pem: Path
    cert_pem: Path
    p12: Path
    encrypted_pem: Path


class TestCA:
    """A CA that signs leaves into ``directory`` (``ca.pem`` its certificate, ``ca.p12`` a
    PKCS12 trust store of it)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "pydmq test CA", valid_days: int = 1) -> None:
        self.directory = directory
        self.valid = datetime.timedelta(days=valid_days)
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self.valid)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / "ca.pem"
        self.pem.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))
        self.p12 = directory / "ca.p12"
        self.p12.write_bytes(
            pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self.certificate, b"ca")],
                serialization.BestAvailableEncryption(PASSWORD.encode()),
            )
        )

    def issue(
        self,
        name: str,
        subject: x509.Name | None = None,
        hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> Identity:
        """A leaf certificate (server and client use) for ``hosts``; subject CN=name unless
        given."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self.valid)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        key_pem = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        encrypted = key.private_bytes(
            pem,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSWORD.encode()),
        )
        chain = certificate.public_bytes(pem) + self.certificate.public_bytes(pem)
        identity = Identity(
            pem=self.directory / f"{name}.pem",
            key_pem=self.directory / f"{name}.key.pem",
            cert_pem=self.directory / f"{name}.cert.pem",
            p12=self.directory / f"{name}.p12",
            encrypted_pem=self.directory / f"{name}.encrypted.pem",
        )
        identity.pem.write_bytes(key_pem + chain)
        identity.key_pem.write_bytes(key_pem)
        identity.cert_pem.write_bytes(chain)
        identity.encrypted_pem.write_bytes(encrypted + chain)
        identity.p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                name.encode(),
                key,
                certificate,
                [self.certificate],
                serialization.BestAvailableEncryption(PASSWORD.encode()),
            )
        )
        return identity
