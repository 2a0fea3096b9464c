"""SSL contexts from Kafka's ssl.* settings: key stores in PEM (file, encrypted, inline) and
PKCS12, trust stores, listener overrides, and the ConfigErrors a bad setting gives at start."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.config.listener_security import security_protocol, ssl_settings
from pydmq.security.tls import client_ssl_context, server_tls
from pydmq.testing.tls import PASSWORD, Identity, TestCA

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def server(ca: TestCA) -> Identity:
    return ca.issue("server")


def settings(**values: object) -> dict[str, object]:
    """The node's ssl.* settings with ``values`` (underscores for dots)."""
    config = BrokerConfig({k.replace("_", "."): v for k, v in values.items()})
    return ssl_settings(config, "SSL")


def test_pem_key_store_file(ca: TestCA, server: Identity) -> None:
    tls = server_tls(settings(ssl_keystore_type="PEM", ssl_keystore_location=server.pem), "SSL")
    assert tls.context.verify_mode == ssl.CERT_NONE
    assert tls.context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert tls.context.maximum_version == ssl.TLSVersion.TLSv1_3


def test_encrypted_pem_needs_its_key_password(server: Identity) -> None:
    good = settings(
        ssl_keystore_type="PEM",
        ssl_keystore_location=server.encrypted_pem,
        ssl_key_password=PASSWORD,
    )
    server_tls(good, "SSL")
    with pytest.raises(ConfigError, match=r"ssl.key.password"):
        server_tls({**good, "ssl.key.password": "wrong"}, "SSL")
    with pytest.raises(ConfigError, match=r"ssl.key.password"):
        server_tls({**good, "ssl.key.password": None}, "SSL")


def test_inline_pem_key_store(server: Identity) -> None:
    inline = settings(
        ssl_keystore_type="PEM",
        ssl_keystore_key=server.key_pem.read_text(),
        ssl_keystore_certificate_chain=server.cert_pem.read_text(),
    )
    server_tls(inline, "SSL")
    with pytest.raises(ConfigError, match=r"ssl.keystore.type=PEM"):
        server_tls({**inline, "ssl.keystore.type": "PKCS12"}, "SSL")


def test_pkcs12_key_store_and_trust_store(ca: TestCA, server: Identity) -> None:
    tls = server_tls(
        settings(
            ssl_keystore_type="PKCS12",
            ssl_keystore_location=server.p12,
            ssl_keystore_password=PASSWORD,
            ssl_truststore_type="PKCS12",
            ssl_truststore_location=ca.p12,
            ssl_truststore_password=PASSWORD,
            ssl_client_auth="required",
        ),
        "SSL",
    )
    assert tls.context.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in tls.context.get_ca_certs()] == [
        ((("commonName", "pydmq test CA"),),)
    ]


def test_a_jks_typed_store_that_is_pkcs12_is_read_as_java_does(server: Identity) -> None:
    server_tls(settings(ssl_keystore_location=server.p12, ssl_keystore_password=PASSWORD), "SSL")


def test_inline_trust_store_and_client_auth_requested(ca: TestCA, server: Identity) -> None:
    tls = server_tls(
        settings(
            ssl_keystore_type="PEM",
            ssl_keystore_location=server.pem,
            ssl_truststore_type="PEM",
            ssl_truststore_certificates=ca.pem.read_text(),
            ssl_client_auth="requested",
        ),
        "SSL",
    )
    assert tls.context.verify_mode == ssl.CERT_OPTIONAL


def test_protocols_and_cipher_suites(server: Identity) -> None:
    tls = server_tls(
        settings(
            ssl_keystore_type="PEM",
            ssl_keystore_location=server.pem,
            ssl_enabled_protocols="TLSv1.2",
            ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
        ),
        "SSL",
    )
    assert tls.context.maximum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in tls.context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    with pytest.raises(ConfigError, match="no usable cipher"):
        server_tls(
            {
                **settings(ssl_keystore_type="PEM", ssl_keystore_location=server.pem),
                "ssl.cipher.suites": ["TLS_NOPE_WITH_NOTHING"],
            },
            "SSL",
        )


def test_client_context_checks_host_names_unless_told_not_to(ca: TestCA) -> None:
    verifying = client_ssl_context(
        settings(ssl_truststore_type="PEM", ssl_truststore_location=ca.pem), "SSL"
    )
    assert verifying.check_hostname and verifying.verify_mode == ssl.CERT_REQUIRED
    lax = client_ssl_context(
        settings(
            ssl_truststore_type="PEM",
            ssl_truststore_location=ca.pem,
            ssl_endpoint_identification_algorithm="",
        ),
        "SSL",
    )
    assert not lax.check_hostname and lax.verify_mode == ssl.CERT_REQUIRED


def test_config_errors_at_start(ca: TestCA, server: Identity, tmp_path: Path) -> None:
    pem = {"ssl.keystore.type": "PEM"}
    with pytest.raises(ConfigError, match="has no key store"):
        server_tls(settings(), "SSL")
    with pytest.raises(ConfigError, match=r"cannot read ssl.keystore.location"):
        server_tls({**settings(**{}), **pem, "ssl.keystore.location": str(tmp_path / "no")}, "SSL")
    with pytest.raises(ConfigError, match="wrong password"):
        server_tls(
            settings(
                ssl_keystore_type="PKCS12",
                ssl_keystore_location=server.p12,
                ssl_keystore_password="nope",
            ),
            "SSL",
        )
    other = ca.issue("other")
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_bytes(other.key_pem.read_bytes() + server.cert_pem.read_bytes())
    with pytest.raises(ConfigError, match="does not match its certificate"):
        server_tls(settings(ssl_keystore_type="PEM", ssl_keystore_location=mismatched), "SSL")
    with pytest.raises(ConfigError, match="cannot be read"):
        server_tls(settings(ssl_keystore_location=server.pem), "SSL")  # PEM typed as JKS
    with pytest.raises(ConfigError, match="no PEM certificate"):
        server_tls(
            settings(
                ssl_keystore_type="PEM",
                ssl_keystore_location=server.pem,
                ssl_client_auth="required",
                ssl_truststore_type="PEM",
                ssl_truststore_location=server.key_pem,
            ),
            "SSL",
        )


def test_listener_overrides_take_precedence() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
            "ssl.client.auth": "requested",
            "ssl.keystore.location": "/node.p12",
            "listener.name.internal.ssl.client.auth": "required",
        }
    )
    assert security_protocol(config, "INTERNAL") == "SSL"
    assert ssl_settings(config, "INTERNAL")["ssl.client.auth"] == "required"
    assert ssl_settings(config, "INTERNAL")["ssl.keystore.location"] == "/node.p12"
    assert ssl_settings(config, "PLAINTEXT")["ssl.client.auth"] == "requested"
    assert "listener.name.internal.ssl.client.auth" not in config.without_effect
    with pytest.raises(ConfigError, match=r"ssl.client.auth"):
        BrokerConfig({"listener.name.internal.ssl.client.auth": "sometimes"})


def test_ssl_and_sasl_ssl_listeners_are_accepted() -> None:
    BrokerConfig({"listeners": "SSL://127.0.0.1:0"})
    BrokerConfig(
        {
            "listeners": "EXTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "EXTERNAL:SASL_SSL",
        }
    )


def test_ssl_settings_cannot_change_at_run_time() -> None:
    """pydmq reads ssl.* at start-up: a dynamic change is refused, not kept without effect."""
    from pydmq.config.dynamic import OP_SET, DynamicConfigError, updated_layer

    with pytest.raises(DynamicConfigError, match="Cannot update these configs dynamically"):
        updated_layer({}, [("ssl.keystore.location", OP_SET, "/new.p12")], lambda name: None)
