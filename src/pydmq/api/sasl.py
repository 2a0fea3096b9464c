"""SaslHandshake (17, v0-v1) and SaslAuthenticate (36, v0-v2): role-neutral handlers that
drive the connection's :class:`~pydmq.security.sasl.authenticator.SaslAuthenticator`; the
broker's and the controller's listeners register the same specs.

After a SaslHandshake v0 the client sends bare tokens, which the dispatcher hands to the
authenticator (:meth:`RequestDispatcher.__call__`); Kafka 4.4 still serves v0, and
librdkafka 2.0 (Debian's kcat) will not authenticate unless v0 is advertised. The
handshake answer always lists the listener's enabled mechanisms. On a listener without SASL
(or once authenticated, without a session limit) both are answered ILLEGAL_SASL_STATE, as
Kafka's request handler answers them. SaslAuthenticate v1+ carries the session lifetime
(KIP-368); a failed exchange is answered SASL_AUTHENTICATION_FAILED with its message and the
connection closes once the answer is written.
"""

from __future__ import annotations

from typing import Any

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.sasl_authenticate import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
)
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

__all__ = ["SASL_AUTHENTICATE_HANDLER", "SASL_HANDSHAKE_HANDLER"]


def handle_sasl_handshake(
    ctx: RequestContext[Any], request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    authenticator = ctx.authenticator
    if authenticator is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    outcome = authenticator.handshake(request.mechanism, ctx.api_version)
    return SaslHandshakeResponse(
        error_code=outcome.error_code, mechanisms=list(authenticator.enabled_mechanisms)
    )


def handle_sasl_authenticate(
    ctx: RequestContext[Any], request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    authenticator = ctx.authenticator
    if authenticator is None:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received on a listener without SASL",
        )
    outcome = authenticator.authenticate(request.auth_bytes)
    return SaslAuthenticateResponse(
        error_code=outcome.error_code,
        error_message=outcome.error_message,
        auth_bytes=outcome.auth_bytes,
        session_lifetime=outcome.session_lifetime_ms,
    )


SASL_HANDSHAKE_HANDLER = ApiHandlerSpec(17, 0, 1, handle_sasl_handshake, "SaslHandshake")
SASL_AUTHENTICATE_HANDLER = ApiHandlerSpec(36, 0, 2, handle_sasl_authenticate, "SaslAuthenticate")
