"""RateLimitGate: per-client request limits per route group, in fixed one-minute windows.

A client is the authenticated user when an earlier gate authenticated the request
(``HttpRequest.user``), else the remote address. Every answer of a limited group carries
``X-RateLimit-Limit`` (requests per window), ``X-RateLimit-Remaining`` (left in this window,
after this request) and ``X-RateLimit-Reset`` (seconds until the window ends); a request
beyond the limit is answered 429 ``RATE_LIMITED`` with ``Retry-After`` instead of running.
Windows are aligned on the clock's minutes, so the counts of every client restart together
and the table holds only the current window's clients.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from pydmq.http.messages import HttpRequest, error_response
from pydmq.http.routing import GateDecision

__all__ = ["WINDOW_S", "RateLimitGate"]

WINDOW_S = 60


class RateLimitGate:
    """Counts requests per (group, client) in the current window. Owned by the HTTP server, on
    its event loop. ``limits`` maps a group to its requests per window (a group absent or at 0
    is not limited); ``clock`` gives wall-clock seconds (tests pass their own)."""

    def __init__(self, limits: Mapping[str, int], clock: Callable[[], float] = time.time) -> None:
        self.limits = {group: limit for group, limit in limits.items() if limit > 0}
        self._clock = clock
        self._window = -1
        self._counts: dict[tuple[str, str], int] = {}

    def admit(self, request: HttpRequest, group: str) -> GateDecision:
        limit = self.limits.get(group)
        if limit is None:
            return GateDecision()
        now = self._clock()
        window = int(now // WINDOW_S)
        if window != self._window:
            self._window = window
            self._counts.clear()
        key = (group, request.user or request.client_host)
        used = self._counts.get(key, 0) + 1
        self._counts[key] = used
        reset = max(1, math.ceil((window + 1) * WINDOW_S - now))
        headers = [
            ("x-ratelimit-limit", str(limit)),
            ("x-ratelimit-remaining", str(max(0, limit - used))),
            ("x-ratelimit-reset", str(reset)),
        ]
        if used <= limit:
            return GateDecision(headers=headers)
        refusal = error_response(
            429,
            "RATE_LIMITED",
            f"more than {limit} requests per minute to the {group} endpoints",
            request.request_id,
            {"limit": limit, "retry_after_seconds": reset},
            [("retry-after", str(reset))],
        )
        return GateDecision(refusal=refusal, headers=headers)
