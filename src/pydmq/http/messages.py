"""HTTP request and response values, and the JSON bodies every route answers with.

Errors use one envelope, the REST admin API's::

    {"error": {"code": "NOT_FOUND", "message": "...", "details": {...}, "request_id": "..."}}

``request_id`` is the request's id, also sent as the ``X-Request-Id`` header.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HttpRequest", "HttpResponse", "error_response", "json_response"]

JSON_TYPE = "application/json"


@dataclass(slots=True)
class HttpRequest:
    """One request as the server read it (the whole body, within its bound)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: list[tuple[str, str]]  # names in lower case, in the order sent
    body: bytes
    client_host: str
    client_port: int
    request_id: str
    params: dict[str, str] = field(default_factory=dict)  # the route template's {names}
    user: str | None = None  # the authenticated user, once a gate authenticated the request

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)


@dataclass(slots=True)
class HttpResponse:
    """A status, a body and its type, and any further headers (Content-Length, Date and
    X-Request-Id are the server's)."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)


def json_response(
    status: int, value: Any, headers: list[tuple[str, str]] | None = None
) -> HttpResponse:
    """``value`` as a JSON body."""
    body = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return HttpResponse(status, body, JSON_TYPE, list(headers or ()))


def error_response(
    status: int,
    code: str,
    message: str,
    request_id: str,
    details: dict[str, Any] | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> HttpResponse:
    """The error envelope (see the module docstring)."""
    error: dict[str, Any] = {"code": code, "message": message, "request_id": request_id}
    if details:
        error["details"] = details
    return json_response(status, {"error": error}, headers)
