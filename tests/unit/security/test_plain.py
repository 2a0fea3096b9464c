"""SASL/PLAIN server with PlainLoginModule users."""

from __future__ import annotations

import pytest

from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.plain import PlainSaslServer

pytestmark = pytest.mark.timeout(30)

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def test_good_password_with_and_without_authzid() -> None:
    for message in (b"\x00alice\x00alice-secret", b"alice\x00alice\x00alice-secret"):
        server = PlainSaslServer(USERS)
        assert server.evaluate_response(message) == b""
        assert server.complete and server.authorization_id == "alice"
        assert server.credential_expiry_ms is None


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"\x00alice\x00wrong", "Invalid username or password"),
        (b"\x00nobody\x00alice-secret", "Invalid username or password"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"alice\x00pw", "expected 3 tokens, got 2"),
        (b"a\x00b\x00c\x00d", "expected 3 tokens, got 4"),
        (b"admin\x00alice\x00alice-secret", "authorization id"),
        (b"\x00alice\x00\xff", "not UTF-8"),
    ],
)
def test_refusals(message: bytes, error: str) -> None:
    server = PlainSaslServer(USERS)
    with pytest.raises(SaslAuthenticationError, match=error):
        server.evaluate_response(message)
    assert not server.complete


def test_one_message_only() -> None:
    server = PlainSaslServer(USERS)
    server.evaluate_response(b"\x00alice\x00alice-secret")
    with pytest.raises(SaslAuthenticationError):
        server.evaluate_response(b"\x00alice\x00alice-secret")
