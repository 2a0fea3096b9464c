"""SASL/OAUTHBEARER (RFC 7628) on the server side, with Kafka's unsecured JWS validator.

The client's first message is ``n,[a=<authzid>],`` then ``\\x01``-separated ``key=value``
pairs, one of them ``auth=Bearer <token>``, and a final ``\\x01``. The token is checked by
a :class:`TokenValidator`: :class:`UnsecuredJwsValidator` is Kafka's default
(``OAuthBearerUnsecuredValidatorCallbackHandler``, for tests and development: ``alg: none``
tokens whose signature is empty; the principal is the ``sub`` claim, or the claim the JAAS
option ``unsecuredValidatorPrincipalClaimName`` names; ``exp`` is required and checked with
``unsecuredValidatorAllowableClockSkewMs``; ``unsecuredValidatorRequiredScope`` names scopes
the ``scope`` claim must hold). A real validator comes from a plugin
(``pydmq_register_oauthbearer_validators``), chosen with ``pydmq.sasl.oauthbearer.validator``.

A refused token is answered, as RFC 7628 and Kafka do, with a JSON error challenge; the
client then sends a single ``\\x01`` and the exchange fails with that JSON as its message.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from pydmq.security.sasl.errors import SaslAuthenticationError

__all__ = [
    "UNSECURED_VALIDATOR",
    "OAuthBearerSaslServer",
    "OAuthBearerToken",
    "OAuthBearerValidatorSpec",
    "TokenValidationError",
    "TokenValidator",
    "UnsecuredJwsValidator",
]

_INITIAL = re.compile(
    r"n,(?:a=(?P<authzid>[^,\x01]*))?,\x01(?P<pairs>(?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*)\x01",
    re.DOTALL,
)
_BEARER = re.compile(r"Bearer +(?P<token>[A-Za-z0-9\-._~+/]+=*)", re.IGNORECASE)


class TokenValidationError(Exception):
    """A token a validator refuses; ``status`` goes into the JSON error (``invalid_token``,
    ``insufficient_scope``)."""

    def __init__(self, message: str, status: str = "invalid_token") -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """A validated token: whose it is, until when (epoch ms) and its scopes."""

    principal_name: str
    lifetime_ms: int
    scope: frozenset[str]


class TokenValidator(Protocol):
    """Validates a bearer token (the built-in unsecured one, or a plugin's: JWKS and the
    like). Called on the event loop, so it must not block: it gets the token's text only."""

    def validate(self, token: str) -> OAuthBearerToken: ...


def _b64url_json(part: str) -> dict[str, object]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise TokenValidationError("token part is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError("token part is not a JSON object")
    return value


def _number(claims: Mapping[str, object], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenValidationError(f"required claim {name!r} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenValidationError(f"claim {name!r} is not a number")
    return float(value)


class UnsecuredJwsValidator:
    """Kafka's unsecured validator (see the module docstring), configured from the JAAS
    options of the listener's OAUTHBEARER entry; ``clock`` gives epoch ms."""

    def __init__(
        self, options: Mapping[str, str], clock: Callable[[], int] = lambda: int(time.time() * 1e3)
    ) -> None:
        self._principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self._scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self._required_scope = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        try:
            self._skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        except ValueError:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must be an integer") from None
        self._clock = clock

    def validate(self, token: str) -> OAuthBearerToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError("an unsecured JWS has three parts")
        if parts[2]:
            raise TokenValidationError("an unsecured JWS has an empty signature")
        header = _b64url_json(parts[0])
        if header.get("alg") != "none":
            raise TokenValidationError("an unsecured JWS has alg 'none'")
        claims = _b64url_json(parts[1])
        now = self._clock()
        exp = _number(claims, "exp", required=True)
        assert exp is not None
        if exp * 1000 + self._skew_ms <= now:
            raise TokenValidationError("the token has expired")
        iat = _number(claims, "iat", required=False)
        if iat is not None and iat * 1000 - self._skew_ms > now:
            raise TokenValidationError("the token was issued in the future")
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenValidationError(f"required claim {self._principal_claim!r} is missing")
        raw_scope = claims.get(self._scope_claim)
        if isinstance(raw_scope, str):
            scope = frozenset(raw_scope.split())
        elif isinstance(raw_scope, list) and all(isinstance(s, str) for s in raw_scope):
            scope = frozenset(raw_scope)
        else:
            scope = frozenset()
        if not self._required_scope <= scope:
            raise TokenValidationError("the token lacks a required scope", "insufficient_scope")
        return OAuthBearerToken(principal, int(exp * 1000), scope)


@dataclass(frozen=True, slots=True)
class OAuthBearerValidatorSpec:
    """A named OAUTHBEARER token validator (``pydmq_register_oauthbearer_validators``):
    ``factory(options)`` gets the JAAS options of the listener's OAUTHBEARER entry and
    returns a :class:`TokenValidator`, or raises ValueError for bad options."""

    name: str
    factory: Callable[[Mapping[str, str]], TokenValidator]
    description: str = ""


UNSECURED_VALIDATOR = OAuthBearerValidatorSpec(
    "unsecured",
    UnsecuredJwsValidator,
    "Kafka's unsecured JWS validator (alg none; for tests and development)",
)


class OAuthBearerSaslServer:
    """One OAUTHBEARER exchange (owned by the connection's authenticator, on the event loop)."""

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        return "" if self._token is None else self._token.principal_name

    @property
    def credential_expiry_ms(self) -> int | None:
        return None if self._token is None else self._token.lifetime_ms

    def evaluate_response(self, response: bytes) -> bytes:
        if self._error is not None:
            # The client's \x01 after our error challenge, or anything else: fail.
            raise SaslAuthenticationError(f"Authentication failed: {self._error}")
        if self._token is not None:
            raise SaslAuthenticationError("Authentication failed: exchange already complete")
        try:
            text = response.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationError(
                "Authentication failed: invalid OAUTHBEARER message"
            ) from None
        match = _INITIAL.fullmatch(text)
        pairs = (
            {}
            if match is None
            else dict(p.split("=", 1) for p in match["pairs"].split("\x01") if p)
        )
        bearer = _BEARER.fullmatch(pairs.get("auth", ""))
        if match is None or bearer is None:
            raise SaslAuthenticationError(
                "Authentication failed: invalid OAUTHBEARER initial client response"
            )
        try:
            token = self._validator.validate(bearer["token"])
        except TokenValidationError as exc:
            self._error = json.dumps({"status": exc.status}, separators=(",", ":"))
            return self._error.encode()
        authzid = match["authzid"]
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationError(
                "Authentication failed: the authorization id differs from the token's principal"
            )
        self._token = token
        return b""
