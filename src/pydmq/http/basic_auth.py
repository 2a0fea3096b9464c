"""BasicAuthGate: HTTP Basic authentication (RFC 7617) for some route groups, in front of the
rate limits.

The credentials are checked by ``verify(user, password)`` (the node's SASL users, see
:mod:`pydmq.rest.auth`), which answers the principal's name or None. An authenticated request
carries the user in ``HttpRequest.user`` (what the rate limits count and the handlers
authorize). A request of a protected group without credentials, or with wrong ones, is
answered 401 ``UNAUTHORIZED`` with ``WWW-Authenticate: Basic``; it still passes the rate
limit first (by its address), so a client guessing passwords is limited and every answer
carries the X-RateLimit headers.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Collection

from pydmq.http.messages import HttpRequest, error_response
from pydmq.http.routing import GateDecision, RequestGate

__all__ = ["BasicAuthGate", "basic_credentials"]

Verify = Callable[[str, str], str | None]


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """The user and password of an ``Authorization: Basic ...`` header, else None."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon and user else None


class BasicAuthGate:
    """Authenticates the requests of ``groups`` and then admits them through ``inner`` (the
    rate limits). Owned by the HTTP server, on its event loop."""

    def __init__(
        self, verify: Verify, groups: Collection[str], inner: RequestGate, realm: str = "pydmq"
    ) -> None:
        self._verify = verify
        self._groups = frozenset(groups)
        self._inner = inner
        self._realm = realm

    def admit(self, request: HttpRequest, group: str) -> GateDecision:
        if group not in self._groups:
            return self._inner.admit(request, group)
        credentials = basic_credentials(request.header("authorization"))
        if credentials is not None:
            request.user = self._verify(*credentials)
        decision = self._inner.admit(request, group)
        if decision.refusal is not None or request.user is not None:
            return decision
        message = (
            "this endpoint needs HTTP Basic credentials"
            if credentials is None
            else "authentication failed: unknown user or wrong password"
        )
        refusal = error_response(
            401,
            "UNAUTHORIZED",
            message,
            request.request_id,
            headers=[("www-authenticate", f'Basic realm="{self._realm}", charset="UTF-8"')],
        )
        return GateDecision(refusal=refusal, headers=decision.headers)
