"""HttpServer over real loopback TCP: keep-alive and pipelining, the error answers (400, 404,
405, 408, 413, 431, 500) in the JSON envelope, bounded slow and idle clients, the connection
limit, the gates' hook, and a bind failure naming the property."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from pydmq.config.http import HttpListener, HttpSettings
from pydmq.http.messages import HttpRequest, HttpResponse, error_response, json_response
from pydmq.http.routing import GateDecision, RequestGate, Router
from pydmq.http.server import HttpListenerError, HttpServer

pytestmark = pytest.mark.timeout(60)

WEDGE_S = 10.0  # a bound that only catches a wedge


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


async def _echo(request: HttpRequest) -> HttpResponse:
    return json_response(
        200, {"path": request.path, "params": request.params, "body": request.body.decode()}
    )


async def _boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("handler failed")


def _router() -> Router:
    router = Router()
    router.add("GET", "/hello", _echo, "monitoring")
    router.add("GET", "/v1/things/{name}", _echo, "admin")
    router.add("DELETE", "/v1/things/{name}", _echo, "admin")
    router.add("POST", "/echo", _echo, "admin")
    router.add("GET", "/boom", _boom, "monitoring")
    return router


@asynccontextmanager
async def serving(
    gates: tuple[RequestGate, ...] = (), **settings: Any
) -> AsyncIterator[HttpServer]:
    listeners = (HttpListener("127.0.0.1", 0),)
    server = HttpServer(HttpSettings(listeners, **settings), _router(), gates)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _read_answer(reader: asyncio.StreamReader, head: bool = False) -> Answer:
    status_line = await asyncio.wait_for(reader.readline(), WEDGE_S)
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while True:
        line = await asyncio.wait_for(reader.readline(), WEDGE_S)
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    body = b"" if head else await asyncio.wait_for(reader.readexactly(length), WEDGE_S)
    return Answer(status, headers, body)


async def _closed(reader: asyncio.StreamReader) -> bool:
    """True when the server closed the connection (EOF) within the wedge bound."""
    try:
        return await asyncio.wait_for(reader.read(1), WEDGE_S) == b""
    except ConnectionResetError:
        return True


async def _connect(server: HttpServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.bound[0].port)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


def test_keep_alive_and_pipelining() -> None:
    async def test() -> None:
        async with serving() as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            first = await _read_answer(reader)
            assert first.status == 200 and first.json()["path"] == "/hello"
            assert first.headers["content-type"] == "application/json"
            assert len(first.headers["x-request-id"]) == 16
            # the same connection, then three pipelined requests answered in order
            writer.write(
                b"GET /v1/things/a%20b HTTP/1.1\r\nHost: x\r\n\r\n"
                b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                b"HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            second = await _read_answer(reader)
            assert second.json()["params"] == {"name": "a b"}
            third = await _read_answer(reader)
            assert third.json()["body"] == "hello"
            fourth = await _read_answer(reader, head=True)
            assert fourth.status == 200 and int(fourth.headers["content-length"]) > 0
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert (await _read_answer(reader)).status == 200
            assert await _closed(reader)
            writer.close()

    run(test)


def test_not_found_and_method_not_allowed() -> None:
    async def test() -> None:
        async with serving() as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
            missing = await _read_answer(reader)
            assert missing.status == 404
            error = missing.json()["error"]
            assert isinstance(error, dict)
            assert error["code"] == "NOT_FOUND"
            assert error["request_id"] == missing.headers["x-request-id"]
            writer.write(b"PUT /v1/things/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            wrong = await _read_answer(reader)
            assert wrong.status == 405
            assert wrong.headers["allow"] == "DELETE, GET, HEAD"
            assert wrong.json()["error"]["code"] == "METHOD_NOT_ALLOWED"  # type: ignore[index]
            # both answered on a connection that stays open
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await _read_answer(reader)).status == 200
            writer.close()

    run(test)


def test_bad_request_line_is_400_and_closes() -> None:
    async def test() -> None:
        async with serving() as server:
            reader, writer = await _connect(server)
            writer.write(b"THIS IS NOT HTTP\r\n\r\n")
            answer = await _read_answer(reader)
            assert answer.status == 400
            assert answer.json()["error"]["code"] == "INVALID_INPUT"  # type: ignore[index]
            assert answer.headers["connection"] == "close"
            assert answer.json()["error"]["request_id"] == answer.headers["x-request-id"]  # type: ignore[index]
            assert await _closed(reader)
            writer.close()

    run(test)


def test_oversize_headers_are_431_and_close() -> None:
    async def test() -> None:
        async with serving(max_header_bytes=4096) as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
            answer = await _read_answer(reader)
            assert answer.status == 431
            assert answer.json()["error"]["code"] == "HEADERS_TOO_LARGE"  # type: ignore[index]
            assert await _closed(reader)
            writer.close()

    run(test)


def test_oversize_body_is_413() -> None:
    async def test() -> None:
        async with serving(max_body_bytes=100) as server:
            # announced too large: refused before the body is read
            reader, writer = await _connect(server)
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            answer = await _read_answer(reader)
            assert answer.status == 413
            assert await _closed(reader)
            writer.close()
            # chunked, growing past the bound
            reader, writer = await _connect(server)
            chunk = b"80\r\n" + b"z" * 128 + b"\r\n"
            writer.write(
                b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
            )
            assert (await _read_answer(reader)).status == 413
            writer.close()

    run(test)


def test_slow_client_is_answered_408_and_closed() -> None:
    async def test() -> None:
        async with serving(request_timeout_s=0.3, idle_timeout_s=30.0) as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /hello HTTP/1.1\r\n")  # the head never completes
            loop = asyncio.get_running_loop()
            started = loop.time()
            for _ in range(3):  # a byte now and then does not extend the deadline
                await asyncio.sleep(0.1)
                writer.write(b"X")
            answer = await _read_answer(reader)
            print(f"slow client answered after {loop.time() - started:.2f} s")
            assert answer.status == 408
            assert answer.json()["error"]["code"] == "REQUEST_TIMEOUT"  # type: ignore[index]
            assert await _closed(reader)
            writer.close()

    run(test)


def test_idle_keep_alive_connection_is_closed() -> None:
    async def test() -> None:
        async with serving(idle_timeout_s=0.3) as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await _read_answer(reader)).status == 200
            assert await _closed(reader)  # nothing more sent: closed without an answer
            writer.close()

    run(test)


def test_handler_failure_is_500() -> None:
    async def test() -> None:
        async with serving() as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await _read_answer(reader)
            assert answer.status == 500
            assert answer.json()["error"]["code"] == "INTERNAL_ERROR"  # type: ignore[index]
            writer.close()

    run(test)


class _Budget:
    """A gate allowing ``limit`` admin requests per client, then 429 (a rate limiter's shape)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used: dict[str, int] = {}

    def admit(self, request: HttpRequest, group: str) -> GateDecision:
        if group != "admin":
            return GateDecision()
        used = self.used[request.client_host] = self.used.get(request.client_host, 0) + 1
        headers = [("x-ratelimit-remaining", str(max(0, self.limit - used)))]
        if used > self.limit:
            refusal = error_response(429, "RATE_LIMITED", "slow down", request.request_id)
            return GateDecision(refusal, headers)
        return GateDecision(headers=headers)


def test_gates_see_each_route_group() -> None:
    async def test() -> None:
        async with serving(gates=(_Budget(1),)) as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /v1/things/a HTTP/1.1\r\nHost: x\r\n\r\n")
            first = await _read_answer(reader)
            assert first.status == 200 and first.headers["x-ratelimit-remaining"] == "0"
            writer.write(b"GET /v1/things/a HTTP/1.1\r\nHost: x\r\n\r\n")
            second = await _read_answer(reader)
            assert second.status == 429 and second.headers["x-ratelimit-remaining"] == "0"
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")  # another group
            third = await _read_answer(reader)
            assert third.status == 200 and "x-ratelimit-remaining" not in third.headers
            writer.close()

    run(test)


def test_connections_beyond_the_limit_are_closed() -> None:
    async def test() -> None:
        async with serving(max_connections=1) as server:
            reader, writer = await _connect(server)
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await _read_answer(reader)).status == 200
            extra_reader, extra_writer = await _connect(server)
            assert await _closed(extra_reader)
            extra_writer.close()
            writer.write(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")  # the first still served
            assert (await _read_answer(reader)).status == 200
            writer.close()

    run(test)


def test_port_in_use_names_the_property() -> None:
    async def test() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            server = HttpServer(HttpSettings((HttpListener("127.0.0.1", port),)), _router())
            with pytest.raises(HttpListenerError, match=r"pydmq\.http\.listeners.*" + str(port)):
                await server.start()

    run(test)
