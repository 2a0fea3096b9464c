"""BasicAuthGate: HTTP Basic authentication (RFC 7617) for some route groups, in front of the
rate limits.

The credentials are checked by ``verify(user, password)`` (the node's SASL users, see
:mod:`pydmq.rest.auth`), which answers the principal's name or None. An authenticated request
carries the user in ``HttpRequest.user`` (what the rate limits count and the handlers
authorize). A request of a protected group without credentials, or with wrong ones, is
answered 401 ``UNAUTHORIZED`` with ``WWW-Authenticate: Basic``; it still passes the rate
limit first (by its address), so a client guessing passwords is limited and every answer
carries the X-RateLimit headers.

A password check can cost milliseconds of the event loop (SCRAM's PBKDF2), and the rate limit
of a guessing client counts only the requests it admits: so an address whose logins failed
``max_failures`` times in the current one-minute window gets its further credentials left
unchecked until the window ends, answered 429 ``RATE_LIMITED`` with ``Retry-After``.
"""

from __future__ import annotations

import base64
import binascii
import math
import time
from collections.abc import Callable, Collection

from pydmq.http.messages import HttpRequest, HttpResponse, error_response
from pydmq.http.ratelimit import WINDOW_S
from pydmq.http.routing import GateDecision, RequestGate

__all__ = ["MAX_FAILURES", "BasicAuthGate", "basic_credentials"]

MAX_FAILURES = 20  # failed logins per address per window before its credentials go unchecked

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
    rate limits). Owned by the HTTP server, on its event loop. ``clock`` gives wall-clock
    seconds (tests pass their own)."""

    def __init__(
        self,
        verify: Verify,
        groups: Collection[str],
        inner: RequestGate,
        realm: str = "pydmq",
        *,
        max_failures: int = MAX_FAILURES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._verify = verify
        self._groups = frozenset(groups)
        self._inner = inner
        self._realm = realm
        self._max_failures = max_failures
        self._clock = clock
        self._window = -1
        self._failures: dict[str, int] = {}  # address -> failed logins in this window

    def admit(self, request: HttpRequest, group: str) -> GateDecision:
        if group not in self._groups:
            return self._inner.admit(request, group)
        credentials = basic_credentials(request.header("authorization"))
        blocked = credentials is not None and self._blocked(request.client_host)
        if credentials is not None and not blocked:
            request.user = self._verify(*credentials)
            if request.user is None:
                self._failures[request.client_host] = self._failures.get(request.client_host, 0) + 1
        decision = self._inner.admit(request, group)
        if decision.refusal is not None or request.user is not None:
            return decision
        if blocked:
            return GateDecision(refusal=self._too_many_failures(request), headers=decision.headers)
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

    def _blocked(self, address: str) -> bool:
        window = int(self._clock() // WINDOW_S)
        if window != self._window:
            self._window = window
            self._failures.clear()
        return self._failures.get(address, 0) >= self._max_failures

    def _too_many_failures(self, request: HttpRequest) -> HttpResponse:
        reset = max(1, math.ceil((self._window + 1) * WINDOW_S - self._clock()))
        return error_response(
            429,
            "RATE_LIMITED",
            f"more than {self._max_failures} failed logins per minute from this address",
            request.request_id,
            {"limit": self._max_failures, "retry_after_seconds": reset},
            [("retry-after", str(reset))],
        )
