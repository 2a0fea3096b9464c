"""A client certificate's subject as Java's X500Principal.getName() prints it (RFC 2253),
which is what Kafka's principal mapping rules see."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from pydmq.security.principal import ANONYMOUS, KafkaPrincipal
from pydmq.security.principal_mapping import NoMatchingRuleError, SslPrincipalMapper
from pydmq.security.tls_principal import rfc2253_subject, ssl_principal
from pydmq.testing.tls import TestCA

pytestmark = pytest.mark.timeout(30)


def dn(*attributes: tuple[x509.ObjectIdentifier, str]) -> str:
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in attributes])
    return rfc2253_subject(name.public_bytes())


def test_last_rdn_first_with_rfc2253_keywords() -> None:
    assert (
        dn(
            (NameOID.COUNTRY_NAME, "US"),
            (NameOID.STATE_OR_PROVINCE_NAME, "MD"),
            (NameOID.LOCALITY_NAME, "Fulton"),
            (NameOID.ORGANIZATION_NAME, "mycp"),
            (NameOID.ORGANIZATIONAL_UNIT_NAME, "SME"),
            (NameOID.COMMON_NAME, "Duke"),
        )
        == "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"
    )
    assert dn((NameOID.DOMAIN_COMPONENT, "com"), (NameOID.USER_ID, "u1")) == "UID=u1,DC=com"


def test_other_attribute_types_are_oid_and_der_hex_as_java_prints_them() -> None:
    # Java: 1.2.840.113549.1.9.1=#16... for emailAddress (an IA5String).
    assert (
        dn((NameOID.EMAIL_ADDRESS, "a@b.c"), (NameOID.COMMON_NAME, "x"))
        == "CN=x,1.2.840.113549.1.9.1=#1605" + b"a@b.c".hex()
    )


def test_special_characters_are_escaped() -> None:
    assert dn((NameOID.COMMON_NAME, 'a,b+c"d\\e<f>g;h=i#j')) == (
        'CN=a\\,b\\+c\\"d\\\\e\\<f\\>g\\;h\\=i\\#j'
    )
    assert dn((NameOID.COMMON_NAME, " x ")) == "CN=\\ x\\ "


def test_multi_valued_rdn() -> None:
    name = x509.Name(
        [
            x509.RelativeDistinguishedName(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, "a"),
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "b"),
                ]
            )
        ]
    )
    assert set(rfc2253_subject(name.public_bytes()).split("+")) == {"CN=a", "OU=b"}


def test_principal_of_a_certificate(tmp_path_factory: pytest.TempPathFactory) -> None:
    ca = TestCA(tmp_path_factory.mktemp("certs"))
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme"),
            x509.NameAttribute(NameOID.COMMON_NAME, "Alice"),
        ]
    )
    identity = ca.issue("alice", subject)
    certificate = x509.load_pem_x509_certificate(identity.cert_pem.read_bytes())
    der = certificate.public_bytes(Encoding.DER)
    assert ssl_principal(der, SslPrincipalMapper.from_rules(None)) == KafkaPrincipal(
        "User", "CN=Alice,O=Acme"
    )
    lower = SslPrincipalMapper.from_rules("RULE:^CN=([^,]*),.*$/$1/L")
    assert ssl_principal(der, lower) == KafkaPrincipal("User", "alice")
    assert ssl_principal(None, lower) is ANONYMOUS
    with pytest.raises(NoMatchingRuleError):
        ssl_principal(der, SslPrincipalMapper.from_rules("RULE:^O=(.*)$/$1/"))
    with pytest.raises(ValueError, match="unreadable"):
        ssl_principal(b"\x30\x03abc", lower)
