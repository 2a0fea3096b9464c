"""The HTTP listener's properties (``pydmq.http.*``): where it listens and its bounds.

The listener serves ``/metrics`` and the health endpoints (:mod:`pydmq.metrics`), over the
server of :mod:`pydmq.http`. ``pydmq.http.listeners`` is a list of ``http://host:port``; an
empty value turns the listener off; port 0 binds a free port (tests, embedded brokers).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pydmq.config.console import CONSOLE_CONFIGS
from pydmq.config.definitions import ConfigDef, ConfigError, ConfigType, ConfigValues, at_least
from pydmq.config.rest import REST_CONFIGS

__all__ = [
    "DEFAULT_HTTP_LISTENER",
    "HTTP_CONFIGS",
    "HTTP_LISTENERS",
    "HttpListener",
    "HttpSettings",
    "parse_http_listener",
]

HTTP_LISTENERS = "pydmq.http.listeners"
DEFAULT_HTTP_LISTENER = "http://127.0.0.1:8082"


@dataclass(frozen=True, slots=True)
class HttpListener:
    """One parsed ``http://host:port``."""

    host: str
    port: int

    @property
    def uri(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def parse_http_listener(uri: str) -> HttpListener:
    """``http://host:port`` -> :class:`HttpListener`; ConfigError naming the property."""
    parts = urlsplit(uri.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme.lower() != "http" or port is None or not parts.hostname:
        raise ConfigError(f"{HTTP_LISTENERS} entry {uri!r} must look like http://host:port")
    if parts.path not in ("", "/") or parts.query:
        raise ConfigError(f"{HTTP_LISTENERS} entry {uri!r} must not have a path")
    return HttpListener(parts.hostname, port)


def _valid_listeners(value: object) -> str | None:
    assert isinstance(value, list)
    try:
        for uri in value:
            parse_http_listener(uri)
    except ConfigError as exc:
        return str(exc)
    return None


HTTP_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        HTTP_LISTENERS,
        ConfigType.LIST,
        [DEFAULT_HTTP_LISTENER],
        "Where the HTTP listener (Prometheus /metrics, /v1/health/live and /v1/health/ready) "
        "listens: a comma-separated list of http://host:port; empty turns it off; port 0 "
        "binds a free port (pydmq).",
        _valid_listeners,
        read_only=True,
    ),
    ConfigDef(
        "pydmq.http.max.header.bytes",
        ConfigType.INT,
        16384,
        "Largest request line and headers an HTTP request may have; a larger one is answered "
        "431 and the connection closed (pydmq).",
        at_least(1024),
        read_only=True,
    ),
    ConfigDef(
        "pydmq.http.max.body.bytes",
        ConfigType.INT,
        1048576,
        "Largest HTTP request body; a larger one is answered 413 and the connection closed "
        "(pydmq).",
        at_least(0),
        read_only=True,
    ),
    ConfigDef(
        "pydmq.http.request.timeout.ms",
        ConfigType.INT,
        10000,
        "Time an HTTP client has to send a whole request (line, headers and body) once its "
        "first byte arrived; a slower one is answered 408 and the connection closed (pydmq).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "pydmq.http.idle.timeout.ms",
        ConfigType.INT,
        60000,
        "Time an idle keep-alive HTTP connection is kept open (pydmq).",
        at_least(1),
        read_only=True,
    ),
    ConfigDef(
        "pydmq.http.max.connections",
        ConfigType.INT,
        256,
        "HTTP connections served at once; a connection beyond them is closed at once (pydmq).",
        at_least(1),
        read_only=True,
    ),  # the REST admin API served on the same listener
    *REST_CONFIGS,
    # the web console served on the same listener
    *CONSOLE_CONFIGS,
)


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """The HTTP listener's settings, read once at start-up."""

    listeners: tuple[HttpListener, ...]
    max_header_bytes: int = 16384
    max_body_bytes: int = 1048576
    request_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0
    max_connections: int = 256

    @classmethod
    def from_config(cls, config: ConfigValues) -> HttpSettings:
        raw = config.get(HTTP_LISTENERS)
        assert isinstance(raw, list)
        return cls(
            listeners=tuple(parse_http_listener(uri) for uri in raw if uri.strip()),
            max_header_bytes=config.get_int("pydmq.http.max.header.bytes"),
            max_body_bytes=config.get_int("pydmq.http.max.body.bytes"),
            request_timeout_s=config.get_int("pydmq.http.request.timeout.ms") / 1000,
            idle_timeout_s=config.get_int("pydmq.http.idle.timeout.ms") / 1000,
            max_connections=config.get_int("pydmq.http.max.connections"),
        )
