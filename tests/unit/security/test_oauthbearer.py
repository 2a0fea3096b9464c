"""SASL/OAUTHBEARER server with Kafka's unsecured JWS validator."""

from __future__ import annotations

import base64
import json

import pytest

from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.oauthbearer import (
    OAuthBearerSaslServer,
    TokenValidationError,
    UnsecuredJwsValidator,
)

pytestmark = pytest.mark.timeout(30)

NOW_MS = 1_700_000_000_000


def b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def token(claims: dict[str, object], header: dict[str, object] | None = None) -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}."


def message(tok: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {tok}\x01\x01".encode()


def validator(**options: str) -> UnsecuredJwsValidator:
    return UnsecuredJwsValidator(options, clock=lambda: NOW_MS)


def test_valid_token_authenticates_its_subject() -> None:
    server = OAuthBearerSaslServer(validator())
    tok = token({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000})
    assert server.evaluate_response(message(tok, "alice")) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiry_ms == NOW_MS + 60_000


def test_principal_claim_and_required_scope_options() -> None:
    v = validator(
        unsecuredValidatorPrincipalClaimName="user",
        unsecuredValidatorRequiredScope="write",
    )
    good = v.validate(token({"user": "bob", "exp": NOW_MS / 1000 + 5, "scope": "read write"}))
    assert good.principal_name == "bob" and good.scope == {"read", "write"}
    with pytest.raises(TokenValidationError) as info:
        v.validate(token({"user": "bob", "exp": NOW_MS / 1000 + 5, "scope": ["read"]}))
    assert info.value.status == "insufficient_scope"


@pytest.mark.parametrize(
    "tok",
    [
        token({"sub": "alice", "exp": NOW_MS / 1000 - 1}),  # expired
        token({"sub": "alice"}),  # no exp
        token({"sub": "alice", "exp": "soon"}),
        token({"exp": NOW_MS / 1000 + 60}),  # no sub
        token({"sub": "alice", "exp": NOW_MS / 1000 + 60, "iat": NOW_MS / 1000 + 30}),
        token({"sub": "alice", "exp": NOW_MS / 1000 + 60}, {"alg": "HS256"}),
        token({"sub": "alice", "exp": NOW_MS / 1000 + 60}) + "c2ln",  # a signature
        "e30.e30",
        "bm90IGpzb24.e30.",
    ],
)
def test_invalid_tokens_get_the_error_challenge_then_fail(tok: str) -> None:
    server = OAuthBearerSaslServer(validator())
    challenge = json.loads(server.evaluate_response(message(tok)))
    assert challenge["status"] in ("invalid_token", "insufficient_scope")
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        server.evaluate_response(b"\x01")
    assert not server.complete


def test_clock_skew_option() -> None:
    tok = token({"sub": "alice", "exp": NOW_MS / 1000 - 1})
    validator(unsecuredValidatorAllowableClockSkewMs="5000").validate(tok)
    with pytest.raises(ValueError, match="integer"):
        validator(unsecuredValidatorAllowableClockSkewMs="soon")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"n,,\x01\x01",  # no auth
        b"n,,\x01auth=Basic abc\x01\x01",
        b"y,,\x01auth=Bearer a.b.\x01\x01",
        b"n,,\x01auth=Bearer a.b.\x01",  # no final \x01
        b"\xff",
    ],
)
def test_malformed_initial_responses(raw: bytes) -> None:
    with pytest.raises(SaslAuthenticationError):
        OAuthBearerSaslServer(validator()).evaluate_response(raw)


def test_authzid_must_match_the_subject() -> None:
    tok = token({"sub": "alice", "exp": NOW_MS / 1000 + 60})
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        OAuthBearerSaslServer(validator()).evaluate_response(message(tok, "admin"))
