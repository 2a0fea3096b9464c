"""One connection's SASL state machine: gating, handshake, exchange, KIP-368 sessions."""

from __future__ import annotations

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.security.principal import ANONYMOUS, KafkaPrincipal
from pydmq.security.sasl.authenticator import SaslAuthenticator, SaslState
from pydmq.security.sasl.mechanism import SaslServer
from pydmq.security.sasl.plain import PlainSaslServer

pytestmark = pytest.mark.timeout(30)

API_VERSIONS, HANDSHAKE, AUTHENTICATE, PRODUCE, METADATA = 18, 17, 36, 0, 3
USERS = {"alice": "pw", "bob": "pw"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def authenticator(reauth_ms: int = 0, clock: Clock | None = None) -> SaslAuthenticator:
    def servers(mechanism: str) -> SaslServer:
        return PlainSaslServer(USERS)

    return SaslAuthenticator(
        ["PLAIN", "SCRAM-SHA-256"], servers, lambda m: reauth_ms, clock or Clock()
    )


def login(auth: SaslAuthenticator, user: str = "alice", password: str = "pw") -> int:
    assert auth.handshake("PLAIN").error_code == ErrorCode.NONE
    outcome = auth.authenticate(f"\x00{user}\x00{password}".encode())
    assert outcome.error_code == ErrorCode.NONE, outcome
    return outcome.session_lifetime_ms


def test_before_authentication_only_versions_and_handshake_are_served() -> None:
    auth = authenticator()
    assert auth.principal == ANONYMOUS
    assert auth.refusal(API_VERSIONS) is None
    assert auth.refusal(HANDSHAKE) is None
    for key in (PRODUCE, METADATA, AUTHENTICATE):
        assert auth.refusal(key) is not None
    auth.handshake("PLAIN")
    assert auth.refusal(AUTHENTICATE) is None
    for key in (API_VERSIONS, HANDSHAKE, PRODUCE):
        assert auth.refusal(key) is not None


def test_successful_exchange_sets_the_principal() -> None:
    auth = authenticator()
    assert login(auth) == 0
    assert auth.principal == KafkaPrincipal("User", "alice")
    assert auth.state is SaslState.AUTHENTICATED
    assert auth.refusal(PRODUCE) is None and not auth.failed


def test_unsupported_mechanism_answers_and_fails() -> None:
    auth = authenticator()
    outcome = auth.handshake("GSSAPI")
    assert outcome.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert auth.failed and auth.refusal(API_VERSIONS) is not None


def test_wrong_password_fails_with_a_message() -> None:
    auth = authenticator()
    auth.handshake("PLAIN")
    outcome = auth.authenticate(b"\x00alice\x00nope")
    assert outcome.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert outcome.error_message == "Authentication failed: Invalid username or password"
    assert auth.failed and auth.principal == ANONYMOUS


def test_after_authentication_sasl_requests_are_illegal_without_a_session_limit() -> None:
    auth = authenticator()
    login(auth)
    assert auth.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    outcome = auth.authenticate(b"\x00alice\x00pw")
    assert outcome.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert not auth.failed and auth.principal.name == "alice"


def test_session_expiry_closes_on_the_next_request_but_a_handshake() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=10_000, clock=clock)
    assert login(auth) == 10_000
    clock.now += 9_999
    assert auth.refusal(PRODUCE) is None
    clock.now += 1
    assert auth.refusal(PRODUCE) is not None
    assert auth.refusal(HANDSHAKE) is None


def test_reauthentication_renews_the_session() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=10_000, clock=clock)
    login(auth)
    clock.now += 8_000
    assert login(auth) == 10_000
    clock.now += 9_000
    assert auth.refusal(PRODUCE) is None
    # at most one re-authentication a second
    assert auth.handshake("PLAIN").error_code == ErrorCode.NONE
    auth.authenticate(b"\x00alice\x00pw")
    assert auth.handshake("PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_reauthentication_keeps_the_principal_and_mechanism() -> None:
    clock = Clock()
    auth = authenticator(reauth_ms=10_000, clock=clock)
    login(auth)
    clock.now += 2_000
    auth.handshake("PLAIN")
    outcome = auth.authenticate(b"\x00bob\x00pw")
    assert outcome.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert auth.failed
    auth = authenticator(reauth_ms=10_000, clock=clock)
    login(auth)
    clock.now += 2_000
    assert auth.handshake("SCRAM-SHA-256").error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert auth.failed


def test_listener_settings_carry_kafkas_precedence_and_failure_delay() -> None:
    from pydmq.config.broker import BrokerConfig
    from pydmq.config.definitions import ConfigError
    from pydmq.security.sasl.listener import SaslListener, SaslListenerSettings

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw";'
    config = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.connections.max.reauth.ms": "5000",
            "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "7000",
            "connection.failed.authentication.delay.ms": "250",
        }
    )
    settings = SaslListenerSettings.from_config(config, "SASL_PLAINTEXT")
    assert settings.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert dict(settings.max_reauth_ms) == {"PLAIN": 5000, "SCRAM-SHA-512": 7000}
    assert settings.failure_delay_ms == 250
    auth = SaslListener(settings, lambda m, u: None).new_authenticator()
    assert auth.failure_delay_ms == 250
    assert login(auth, "alice", "pw") == 5000
    other = SaslListenerSettings.from_config(config, "OTHER")
    assert other.enabled_mechanisms == ("SCRAM-SHA-256",)
    for bad in ("GSSAPI", "PLAIN"):  # Kerberos refused; PLAIN without a JAAS entry refused
        with pytest.raises(ConfigError):
            SaslListenerSettings.from_config(
                BrokerConfig(
                    {
                        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                        "sasl.enabled.mechanisms": bad,
                    }
                ),
                "SASL_PLAINTEXT",
            )
