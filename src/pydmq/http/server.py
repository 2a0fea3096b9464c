"""HttpServer: the HTTP/1.1 listener(s) of one node, on its event loop.

h11 parses and frames (sans-IO); this module drives it over asyncio streams and bounds what a
client may cost:

- the request line and headers: ``max_header_bytes`` (431, then close; h11 bounds its buffer);
- the body: ``max_body_bytes`` (413 from the announced Content-Length, or once the bytes read
  pass it; then close);
- time: once a request's first byte arrived, the whole request must arrive within
  ``request_timeout_s`` (408, then close: a client sending a byte at a time cannot hold a
  connection); an idle keep-alive connection is closed after ``idle_timeout_s``, as is one
  that does not read its answer within that time;
- connections: at most ``max_connections`` at once (a further one is closed at once).

An unparsable request is answered 400, an unknown path 404, a known path with another method
405 (with ``Allow``), a failing handler 500; every error body is the JSON envelope of
:mod:`pydmq.http.messages`. Connections are kept alive (HTTP/1.1's default) and pipelined
requests answered in order. Each request runs the server's gates (:class:`RequestGate`) with
its route's group before its handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import h11

from pydmq.config.http import HTTP_LISTENERS, HttpListener, HttpSettings
from pydmq.http.messages import HttpRequest, HttpResponse, error_response
from pydmq.http.routing import MethodNotAllowed, RequestGate, Router

__all__ = ["HttpListenerError", "HttpServer"]

log = logging.getLogger(__name__)
_READ_SIZE = 65536
# After an error answer, how long and how much the server still reads before closing.
_LINGER_S = 2.0
_LINGER_BYTES = 1 << 20


class HttpListenerError(OSError):
    """An HTTP listener could not be bound (the message names the property)."""


class _Refused(Exception):
    """The request cannot be served: answer ``response`` and close the connection."""

    def __init__(self, response: HttpResponse, request_id: str) -> None:
        super().__init__(response.status)
        self.response = response
        self.request_id = request_id


class HttpServer:
    """Serves ``router`` on every listener of ``settings``. Owned by the node, on its event
    loop; each connection is a task of its own, cancelled by :meth:`stop`."""

    def __init__(
        self, settings: HttpSettings, router: Router, gates: Sequence[RequestGate] = ()
    ) -> None:
        self.settings = settings
        self.router = router
        self.gates = tuple(gates)
        self.bound: list[HttpListener] = []  # what each listener bound (port 0 resolved)
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Bind and serve every listener; HttpListenerError (naming the property) when one
        cannot be bound, the others closed again."""
        for listener in self.settings.listeners:
            try:
                server = await asyncio.start_server(
                    self._serve_connection, listener.host, listener.port, reuse_address=True
                )
            except OSError as exc:
                await self.stop()
                raise HttpListenerError(
                    f"{HTTP_LISTENERS}: cannot listen on {listener.uri}: "
                    f"{exc.strerror or exc} (set {HTTP_LISTENERS} to another address, or to "
                    "an empty value to turn the HTTP listener off)"
                ) from None
            self._servers.append(server)
            self.bound.append(HttpListener(listener.host, server.sockets[0].getsockname()[1]))

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        self._servers.clear()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is None or len(self._connections) >= self.settings.max_connections:
            writer.close()
            return
        self._connections.add(task)
        try:
            await _HttpConnection(self, reader, writer).serve()
        except (ConnectionError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("HTTP connection failed")
        finally:
            self._connections.discard(task)
            writer.close()

    async def respond(self, request: HttpRequest) -> HttpResponse:
        """The answer to one complete request: routing, gates, handler."""
        resolved = self.router.resolve(request.method, request.path)
        if resolved is None:
            return error_response(
                404, "NOT_FOUND", f"no resource at {request.path}", request.request_id
            )
        if isinstance(resolved, MethodNotAllowed):
            return error_response(
                405,
                "METHOD_NOT_ALLOWED",
                f"{request.method} is not allowed on {request.path}",
                request.request_id,
                {"allow": list(resolved.allow)},
                [("allow", ", ".join(resolved.allow))],
            )
        route, request.params = resolved
        extra: list[tuple[str, str]] = []
        for gate in self.gates:
            decision = gate.admit(request, route.group)
            extra.extend(decision.headers)
            if decision.refusal is not None:
                decision.refusal.headers.extend(extra)
                return decision.refusal
        try:
            response = await route.handler(request)
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.path)
            response = error_response(
                500, "INTERNAL_ERROR", "the request failed on the server", request.request_id
            )
        response.headers.extend(extra)
        return response


class _HttpConnection:
    """One client connection: requests read through h11, answered in order. Owned by its
    connection task."""

    def __init__(
        self, server: HttpServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.settings = server.settings
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_host, self.client_port = (
            (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else ("", 0)
        )
        self.h11 = h11.Connection(
            h11.SERVER, max_incomplete_event_size=server.settings.max_header_bytes
        )

    async def serve(self) -> None:
        while True:
            try:
                request = await self._read_request()
            except _Refused as refused:
                await self._send_raw(refused.response, refused.request_id)
                return
            if request is None:
                return
            response = await self.server.respond(request)
            if not await self._send(request, response):
                return
            self.h11.start_next_cycle()

    async def _read_request(self) -> HttpRequest | None:
        """The next complete request; None when the client closed or stayed idle too long."""
        loop = asyncio.get_running_loop()
        settings = self.settings
        conn = self.h11
        started = bool(conn.trailing_data[0])
        deadline = loop.time() + (
            settings.request_timeout_s if started else settings.idle_timeout_s
        )
        head: h11.Request | None = None
        body = bytearray()
        request_id = secrets.token_hex(8)
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                code = "HEADERS_TOO_LARGE" if status == 431 else "INVALID_INPUT"
                raise _Refused(
                    error_response(status, code, str(exc), request_id), request_id
                ) from None
            if event is h11.NEED_DATA:
                remaining = deadline - loop.time()
                data = b""
                if remaining > 0:
                    with contextlib.suppress(TimeoutError):
                        data = await asyncio.wait_for(self.reader.read(_READ_SIZE), remaining)
                        if not data:
                            conn.receive_data(b"")  # the client closed its side
                            continue
                if not data:
                    if not started:
                        return None  # idle
                    raise _Refused(
                        error_response(
                            408,
                            "REQUEST_TIMEOUT",
                            f"the request did not arrive within {settings.request_timeout_s:g} s",
                            request_id,
                        ),
                        request_id,
                    )
                if not started:
                    started = True
                    deadline = loop.time() + settings.request_timeout_s
                conn.receive_data(data)
            elif isinstance(event, h11.Request):
                head = event
                started = True
                self._check_length(event, request_id)
                if conn.client_is_waiting_for_100_continue:
                    self.writer.write(
                        conn.send(h11.InformationalResponse(status_code=100, headers=[])) or b""
                    )
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > settings.max_body_bytes:
                    raise _Refused(self._too_large(request_id), request_id)
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return self._request(head, bytes(body), request_id)
            elif isinstance(event, h11.ConnectionClosed):
                return None

    def _check_length(self, head: h11.Request, request_id: str) -> None:
        # h11 bounds a head still incomplete; one that arrived whole in a read is measured here
        size = (
            len(head.method) + len(head.target) + sum(len(k) + len(v) + 4 for k, v in head.headers)
        )
        if size > self.settings.max_header_bytes:
            raise _Refused(
                error_response(
                    431,
                    "HEADERS_TOO_LARGE",
                    f"the request line and headers are over {self.settings.max_header_bytes} bytes",
                    request_id,
                ),
                request_id,
            )
        for name, value in head.headers:
            if name == b"content-length" and int(value) > self.settings.max_body_bytes:
                raise _Refused(self._too_large(request_id), request_id)

    def _too_large(self, request_id: str) -> HttpResponse:
        return error_response(
            413,
            "PAYLOAD_TOO_LARGE",
            f"the body is over {self.settings.max_body_bytes} bytes",
            request_id,
        )

    def _request(self, head: h11.Request, body: bytes, request_id: str) -> HttpRequest:
        target = urlsplit(head.target.decode("latin-1"))
        return HttpRequest(
            method=head.method.decode("ascii", "replace"),
            path=target.path or "/",
            query=parse_qs(target.query),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers],
            body=body,
            client_host=self.client_host,
            client_port=self.client_port,
            request_id=request_id,
        )

    def _headers(self, request_id: str, response: HttpResponse) -> list[tuple[str, str]]:
        return [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            ("date", _http_date()),
            ("x-request-id", request_id),
            *response.headers,
        ]

    async def _send(self, request: HttpRequest, response: HttpResponse) -> bool:
        """Write the answer; True when the connection stays open for the next request."""
        conn = self.h11
        data = conn.send(
            h11.Response(
                status_code=response.status,
                headers=self._headers(request.request_id, response),
                reason=_reason(response.status),
            )
        )
        out = bytearray(data or b"")
        if request.method != "HEAD" and response.body:
            out += conn.send(h11.Data(data=response.body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        self.writer.write(out)
        await asyncio.wait_for(self.writer.drain(), self.settings.idle_timeout_s)
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _send_raw(self, response: HttpResponse, request_id: str) -> None:
        """An answer written outside h11's state (the request could not be read), then the
        connection closes."""
        lines = [f"HTTP/1.1 {response.status} {_reason(response.status).decode()}"]
        for name, value in [*self._headers(request_id, response), ("connection", "close")]:
            lines.append(f"{name}: {value}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        with contextlib.suppress(ConnectionError, TimeoutError):
            await asyncio.wait_for(self.writer.drain(), self.settings.idle_timeout_s)
            await self._linger()

    async def _linger(self) -> None:
        """Close our side, then read and drop what the client still sends for a moment: a
        socket closed with unread bytes answers with a reset, which can destroy the error
        answer before the client read it."""
        if not self.writer.can_write_eof():
            return
        self.writer.write_eof()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _LINGER_S
        dropped = 0
        while dropped < _LINGER_BYTES and (remaining := deadline - loop.time()) > 0:
            data = await asyncio.wait_for(self.reader.read(_READ_SIZE), remaining)
            if not data:
                return
            dropped += len(data)


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _http_date() -> str:
    """RFC 9110's IMF-fixdate of now (names in English whatever the locale)."""
    now = time.gmtime()
    day = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")[now.tm_wday]
    month = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    return f"{day}, {now.tm_mday:02d} {month[now.tm_mon - 1]} {now.tm_year} " + time.strftime(
        "%H:%M:%S GMT", now
    )
