"""The SASL side of one connection: Kafka's ``SaslServerAuthenticator`` as a sans-IO state
machine.

A connection of a SASL listener starts in ``HANDSHAKE``: ApiVersions and SaslHandshake are
served, anything else closes the connection. A handshake naming an enabled mechanism starts
that mechanism's exchange (``AUTHENTICATE``: only SaslAuthenticate is served); an unknown one
is answered UNSUPPORTED_SASL_MECHANISM with the enabled list and the connection closes. The
exchange ends ``AUTHENTICATED`` (the principal is ``User:<authorization id>``) or ``FAILED``
(SASL_AUTHENTICATION_FAILED with a message, then the connection closes).

A SaslHandshake v0 client (pre-KIP-152) then sends the mechanism's tokens as bare
size-prefixed frames, without SaslAuthenticate headers (:attr:`SaslAuthenticator.raw_tokens`),
and gets bare tokens back; a failure closes the connection without an answer, as Kafka does.

KIP-368: the session lifetime is ``connections.max.reauth.ms`` of the listener (and
mechanism), shortened to the credential's own expiry (an OAUTHBEARER token's ``exp``), 0 when
neither is set. Once it has passed, any request but a SaslHandshake closes the connection; a
SaslHandshake with the same mechanism on an authenticated connection whose session expires
starts a re-authentication (at most one a second, as Kafka), which must end with the same
principal. Without a session lifetime, SaslHandshake and SaslAuthenticate on an authenticated
connection are answered ILLEGAL_SASL_STATE, as Kafka's request handler answers them.

Owned by its connection, called on the event loop by the dispatcher (the gate) and by the
SaslHandshake and SaslAuthenticate handlers.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydmq.protocol.errors import ErrorCode
from pydmq.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from pydmq.security.sasl.errors import InvalidCredentialsError, SaslAuthenticationError
from pydmq.security.sasl.mechanism import SaslServer

__all__ = ["SaslAuthenticator", "SaslOutcome", "SaslState"]

_API_VERSIONS = 18
_SASL_HANDSHAKE = 17
_SASL_AUTHENTICATE = 36
_MIN_REAUTH_INTERVAL_MS = 1000


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslOutcome:
    """The answer to one SaslHandshake or SaslAuthenticate."""

    error_code: ErrorCode
    error_message: str | None = None
    auth_bytes: bytes = b""
    session_lifetime_ms: int = 0


# Mechanism name -> a fresh exchange of it.
SaslServerFactory = Callable[[str], SaslServer]
# Mechanism name -> its connections.max.reauth.ms on this listener (0: no limit).
ReauthMs = Callable[[str], int]


class SaslAuthenticator:
    """One connection's SASL state (see the module docstring)."""

    def __init__(
        self,
        enabled_mechanisms: Sequence[str],
        servers: SaslServerFactory,
        max_reauth_ms: ReauthMs,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        failure_delay_ms: int = 0,
        max_receive_size: int = 524288,
    ) -> None:
        self.enabled_mechanisms = list(enabled_mechanisms)
        # connection.failed.authentication.delay.ms: how long a failed connection stays
        # open (unread) after its answer before it closes.
        self.failure_delay_ms = failure_delay_ms
        # sasl.server.max.receive.size: the frame limit until the first authentication
        # completes (then socket.request.max.bytes alone).
        self.max_receive_size = max_receive_size
        self.authenticated_once = False
        self._servers = servers
        self._max_reauth_ms = max_reauth_ms
        self._clock = clock
        self.state = SaslState.HANDSHAKE
        self.principal: KafkaPrincipal = ANONYMOUS
        self._mechanism: str | None = None
        self._server: SaslServer | None = None
        self._session_expires_ms: int | None = None
        self._reauthenticating = False
        self._last_reauth_ms: int | None = None
        # After a SaslHandshake v0: the next frames are bare SASL tokens.
        self.raw_tokens = False

    @property
    def failed(self) -> bool:
        """True once the connection must close after its answer is written."""
        return self.state is SaslState.FAILED

    def refusal(self, api_key: int) -> str | None:
        """Why a request of ``api_key`` closes the connection now, None if it is served."""
        match self.state:
            case SaslState.HANDSHAKE:
                if api_key in (_API_VERSIONS, _SASL_HANDSHAKE):
                    return None
                return f"unexpected request (API key {api_key}) during the SASL handshake"
            case SaslState.AUTHENTICATE:
                if api_key == _SASL_AUTHENTICATE:
                    return None
                return f"unexpected request (API key {api_key}) during SASL authentication"
            case SaslState.AUTHENTICATED:
                expires = self._session_expires_ms
                if api_key != _SASL_HANDSHAKE and expires is not None and self._clock() >= expires:
                    return "the SASL session expired without re-authentication"
                return None
            case SaslState.FAILED:
                return "SASL authentication failed"

    def handshake(self, mechanism: str, version: int = 1) -> SaslOutcome:
        """A SaslHandshake of ``version`` naming ``mechanism``."""
        if self.state is SaslState.AUTHENTICATED:
            if not self._may_reauthenticate():
                return SaslOutcome(ErrorCode.ILLEGAL_SASL_STATE)
            if mechanism != self._mechanism:
                self.state = SaslState.FAILED
                return SaslOutcome(
                    ErrorCode.ILLEGAL_SASL_STATE,
                    f"re-authentication must use {self._mechanism}, not {mechanism}",
                )
            self._reauthenticating = True
            self._last_reauth_ms = self._clock()
        elif self.state is not SaslState.HANDSHAKE:
            self.state = SaslState.FAILED
            return SaslOutcome(ErrorCode.ILLEGAL_SASL_STATE)
        if mechanism not in self.enabled_mechanisms:
            self.state = SaslState.FAILED
            return SaslOutcome(ErrorCode.UNSUPPORTED_SASL_MECHANISM)
        self._mechanism = mechanism
        self._server = self._servers(mechanism)
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = version == 0
        return SaslOutcome(ErrorCode.NONE)

    def authenticate(self, auth_bytes: bytes) -> SaslOutcome:
        """A SaslAuthenticate carrying one client token."""
        server = self._server
        if self.state is not SaslState.AUTHENTICATE or server is None:
            return SaslOutcome(
                ErrorCode.ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received after successful authentication",
            )
        try:
            challenge = server.evaluate_response(auth_bytes)
        except InvalidCredentialsError:
            self.state = SaslState.FAILED
            during = "re-authentication" if self._reauthenticating else "authentication"
            return SaslOutcome(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Authentication failed during {during} due to invalid credentials with SASL "
                f"mechanism {self._mechanism}",
            )
        except SaslAuthenticationError as exc:
            self.state = SaslState.FAILED
            return SaslOutcome(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
        if not server.complete:
            return SaslOutcome(ErrorCode.NONE, auth_bytes=challenge)
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self._reauthenticating and principal != self.principal:
            self.state = SaslState.FAILED
            return SaslOutcome(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot change principals during re-authentication from {self.principal}: "
                f"{principal}",
            )
        self.principal = principal
        self.state = SaslState.AUTHENTICATED
        self.authenticated_once = True
        self._server = None
        self._reauthenticating = False
        self.raw_tokens = False
        lifetime = self._session_lifetime_ms(server.credential_expiry_ms)
        return SaslOutcome(ErrorCode.NONE, auth_bytes=challenge, session_lifetime_ms=lifetime)

    def _session_lifetime_ms(self, credential_expiry_ms: int | None) -> int:
        """Kafka's rule (see the module docstring); sets when the session expires."""
        assert self._mechanism is not None
        now = self._clock()
        max_reauth = self._max_reauth_ms(self._mechanism)
        if credential_expiry_ms is None and max_reauth <= 0:
            self._session_expires_ms = None
            return 0
        if credential_expiry_ms is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = credential_expiry_ms - now
        else:
            lifetime = min(credential_expiry_ms - now, max_reauth)
        lifetime = max(lifetime, 0)
        self._session_expires_ms = now + lifetime
        return lifetime

    def _may_reauthenticate(self) -> bool:
        """KIP-368: only a session that expires re-authenticates, at most once a second."""
        if self._session_expires_ms is None:
            return False
        last = self._last_reauth_ms
        return last is None or self._clock() - last >= _MIN_REAUTH_INTERVAL_MS
