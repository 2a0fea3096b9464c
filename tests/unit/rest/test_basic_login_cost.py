"""What an HTTP Basic login costs the event loop: a SCRAM check (PBKDF2) runs once per user
and password while the credential stays the same, never for a user without a credential, and
an address whose logins keep failing has its credentials left unchecked for the window."""

from __future__ import annotations

import base64

from pydmq.http.basic_auth import BasicAuthGate
from pydmq.http.messages import HttpRequest
from pydmq.http.ratelimit import RateLimitGate
from pydmq.rest.auth import SaslPasswordCheck
from pydmq.security.sasl.jaas import single_login_module
from pydmq.security.sasl.listener import SaslListener, SaslListenerSettings
from pydmq.security.sasl.scram import ScramCredential, ScramMechanism, scram_credential

SCRAM = ScramMechanism.SCRAM_SHA_512


def listener_with(credentials: dict[str, ScramCredential]) -> SaslListener:
    plain = single_login_module(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_alice="alice-secret";'
    )
    settings = SaslListenerSettings(
        "SASL_PLAINTEXT", ("SCRAM-SHA-512", "PLAIN"), {"PLAIN": plain}, {}
    )
    return SaslListener(
        settings, lambda mechanism, user: credentials.get(user) if mechanism is SCRAM else None
    )


def test_a_scram_login_is_checked_once_while_its_credential_stays() -> None:
    credentials = {"admin": scram_credential(SCRAM, "admin-secret", b"salt-1", 4096)}
    check = SaslPasswordCheck(listener_with(credentials))
    assert check("admin", "admin-secret") == "admin"
    assert check("admin", "admin-secret") == "admin"
    assert check.expensive_checks == 1
    # a wrong password is never answered from the remembered login
    assert check("admin", "wrong") is None
    assert check.expensive_checks == 2
    # a new password (AlterUserScramCredentials) makes the old one fail at once
    credentials["admin"] = scram_credential(SCRAM, "new-secret", b"salt-2", 4096)
    assert check("admin", "admin-secret") is None
    assert check("admin", "new-secret") == "admin"
    # a deleted user cannot log in, and costs nothing to refuse
    del credentials["admin"]
    before = check.expensive_checks
    assert check("admin", "new-secret") is None
    assert check.expensive_checks == before


def test_users_without_a_credential_cost_nothing() -> None:
    check = SaslPasswordCheck(listener_with({}))
    for i in range(100):
        assert check(f"mallory-{i}", "guess") is None
    assert check.expensive_checks == 0
    assert check("alice", "alice-secret") == "alice"  # PLAIN's JAAS user
    assert check.expensive_checks == 1


class _Clock:
    def __init__(self) -> None:
        self.now = 6000.0

    def __call__(self) -> float:
        return self.now


def _request(user: str, password: str, host: str = "10.0.0.1") -> HttpRequest:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return HttpRequest(
        "GET", "/v1/admin/topics", {}, [("authorization", f"Basic {token}")], b"", host, 1, "r"
    )


def test_an_address_that_keeps_failing_is_not_checked_until_the_window_ends() -> None:
    checked: list[str] = []

    def verify(user: str, password: str) -> str | None:
        checked.append(password)
        return user if password == "right" else None

    clock = _Clock()
    gate = BasicAuthGate(
        verify, ["admin"], RateLimitGate({"admin": 1000}, clock), max_failures=3, clock=clock
    )
    statuses = []
    for i in range(5):
        decision = gate.admit(_request("admin", f"guess-{i}"), "admin")
        assert decision.refusal is not None
        statuses.append(decision.refusal.status)
    assert statuses == [401, 401, 401, 429, 429]
    assert len(checked) == 3
    refused = gate.admit(_request("admin", "right"), "admin").refusal
    assert refused is not None and ("retry-after", "60") in refused.headers
    # another address is not held back; the next window checks again
    assert gate.admit(_request("admin", "right", "10.0.0.2"), "admin").refusal is None
    clock.now += 60
    assert gate.admit(_request("admin", "right"), "admin").refusal is None
