"""Routes: a method and a path template (``/v1/admin/topics/{name}``) to a handler.

Each route belongs to a group (``monitoring`` for metrics, health and the OpenAPI document;
``admin`` for the REST admin API): the server hands the group to its gates (:class:`RequestGate`), where per-client
limits (rate limits, authentication) decide per group. Resolution answers what the server
needs for 404 (no template matches) and 405 (a template matches, not with this method: the
``Allow`` header lists those that would). A route's :class:`RouteDoc` is what the OpenAPI
document (:mod:`pydmq.http.openapi`) says of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import unquote

from pydmq.http.messages import HttpRequest, HttpResponse

__all__ = [
    "GateDecision",
    "Handler",
    "MethodNotAllowed",
    "RequestGate",
    "Route",
    "RouteDoc",
    "Router",
]

Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


@dataclass(frozen=True, slots=True)
class RouteDoc:
    """What the OpenAPI document says of a route (:mod:`pydmq.http.openapi`): a summary, the
    JSON Schema of its request body (None: no body), its answers by status (a JSON Schema
    each, None for an empty body) and its query parameters (name -> description)."""

    summary: str
    responses: Mapping[int, Mapping[str, Any] | None]
    request_body: Mapping[str, Any] | None = None
    query: Mapping[str, str] = field(default_factory=dict)
    tag: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    """One method on one path template, served by ``handler``."""

    method: str
    template: str
    handler: Handler
    group: str
    doc: RouteDoc | None = None

    def match(self, segments: Sequence[str]) -> dict[str, str] | None:
        """The template's ``{name}`` values if ``segments`` match it, else None."""
        parts = _segments(self.template)
        if len(parts) != len(segments):
            return None
        params: dict[str, str] = {}
        for part, segment in zip(parts, segments, strict=True):
            if part.startswith("{") and part.endswith("}"):
                if not segment:
                    return None
                params[part[1:-1]] = unquote(segment)
            elif part != segment:
                return None
        return params


@dataclass(frozen=True, slots=True)
class MethodNotAllowed:
    """The path is served, not with the request's method."""

    allow: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GateDecision:
    """A gate's word on one request: ``refusal`` answers it instead of its route; ``headers``
    go on whatever answers it (e.g. X-RateLimit-Remaining)."""

    refusal: HttpResponse | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)


class RequestGate(Protocol):
    """Decides, per client and route group, before a route's handler runs (rate limits,
    authentication). Called on the event loop, for every request that matched a route."""

    def admit(self, request: HttpRequest, group: str) -> GateDecision: ...


def _segments(path: str) -> list[str]:
    return path.strip("/").split("/") if path.strip("/") else []


class Router:
    """The routes of one HTTP listener, built before it serves; read on the event loop."""

    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(
        self,
        method: str,
        template: str,
        handler: Handler,
        group: str,
        doc: RouteDoc | None = None,
    ) -> None:
        method = method.upper()
        if any(r.method == method and r.template == template for r in self.routes):
            raise ValueError(f"route {method} {template} is already defined")
        self.routes.append(Route(method, template, handler, group, doc))

    def resolve(
        self, method: str, path: str
    ) -> tuple[Route, dict[str, str]] | MethodNotAllowed | None:
        """The route and its parameters; MethodNotAllowed; None when no template matches.
        HEAD is served by the GET route (without its body)."""
        segments = _segments(path)
        allowed: list[str] = []
        wanted = "GET" if method == "HEAD" else method
        for route in self.routes:
            params = route.match(segments)
            if params is None:
                continue
            if route.method == wanted:
                return route, params
            allowed.append(route.method)
        if not allowed:
            return None
        if "GET" in allowed:
            allowed.append("HEAD")
        return MethodNotAllowed(tuple(sorted(set(allowed))))
