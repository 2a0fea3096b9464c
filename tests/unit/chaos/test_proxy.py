"""ChaosProxy against a real echo server on loopback: classification, cut, heal, delay."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import socketserver
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from pydmq.chaos.proxy import (
    HIGH_WATER,
    ChaosProxy,
    LinkTable,
    ProxyProcess,
    Route,
    classify,
    parse_route,
    sniff_client_id,
)
from pydmq.testing.ports import free_port

pytestmark = pytest.mark.timeout(30)

HOST = "127.0.0.1"
SILENCE = 0.5  # how long "gets nothing back" is observed


def frame(client_id: str | None, payload: bytes = b"", correlation: int = 1) -> bytes:
    """A Kafka request frame (api_key 18, version 3) with ``payload`` as its body."""
    if client_id is None:
        cid = struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        cid = struct.pack(">h", len(raw)) + raw
    body = struct.pack(">hhi", 18, 3, correlation) + cid + payload
    return struct.pack(">i", len(body)) + body


class EchoServer:
    """Echoes every byte; records connections and bytes received."""

    def __init__(self) -> None:
        self.connections = 0
        self.received = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.handlers: list[asyncio.Task[object]] = []
        self.server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.append(task)
        self.connections += 1
        self.writers.append(writer)
        try:
            while data := await reader.read(256 * 1024):
                self.received += len(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, HOST, 0)

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await asyncio.wait_for(asyncio.gather(*self.handlers, return_exceptions=True), 5)
        await self.server.wait_closed()


@asynccontextmanager
async def proxied(
    label: str = "node-1", target_port: int | None = None
) -> AsyncIterator[tuple[ChaosProxy, EchoServer, int]]:
    """An echo server behind a one-route proxy: yields (proxy, echo, proxy port)."""
    echo = EchoServer()
    await echo.start()
    proxy = ChaosProxy([Route(label, HOST, 0, HOST, target_port or echo.port)])
    await proxy.start()
    try:
        yield proxy, echo, proxy.listen_ports[0]
    finally:
        await proxy.close()
        await echo.close()


class Client:
    """A raw Kafka-speaking TCP client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, port: int) -> Client:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def roundtrip(self, data: bytes, timeout: float = 5.0) -> bytes:
        await self.send(data)
        return await asyncio.wait_for(self.reader.readexactly(len(data)), timeout)

    async def silent(self, seconds: float = SILENCE) -> bool:
        """True when nothing arrives for ``seconds`` (the connection stays open)."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), seconds)
        except TimeoutError:
            return True
        raise AssertionError(f"expected silence, got {data!r}")

    async def closed(self, timeout: float = 5.0) -> bool:
        """True when the peer closes or resets the connection within ``timeout``."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    def close(self) -> None:
        self.writer.close()


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


# --- pure logic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client_id", "label"),
    [
        ("broker-1", "node-1"),
        ("replica-fetcher-2", "node-2"),
        ("pydmq-raft-3", "node-3"),
        ("pydmq-controller-12", "node-12"),
        ("producer-0", "producer-0"),
        ("member-1", "member-1"),
        ("reader-0", "reader-0"),
        ("chaos-observer", "chaos-observer"),
        ("broker-", "broker-"),
        ("broker-1x", "broker-1x"),
        ("xbroker-1", "xbroker-1"),
        ("", "unknown"),
        (None, "unknown"),
    ],
)
def test_classify(client_id: str | None, label: str) -> None:
    assert classify(client_id) == label


def test_sniff_client_id() -> None:
    data = frame("producer-0", b"body")
    for cut_at in range(len(frame("producer-0")) - 4):
        assert sniff_client_id(data[:cut_at]) == (False, None)
    assert sniff_client_id(data) == (True, "producer-0")
    assert sniff_client_id(frame(None, b"x")) == (True, None)
    assert sniff_client_id(frame("", b"x")) == (True, "")
    bogus = struct.pack(">ihhih", 12, 18, 3, 1, 500) + b"a" * 600  # id longer than frame
    assert sniff_client_id(bogus) == (True, None)


def test_parse_route() -> None:
    route = parse_route("node-2=127.0.0.1:9001=127.0.0.1:19001")
    assert route == Route("node-2", "127.0.0.1", 9001, "127.0.0.1", 19001)
    assert parse_route(route.spec) == route
    for bad in ("node-2", "node-2=127.0.0.1=127.0.0.1:1", "=h:1=h:2", "n=h:x=h:2"):
        with pytest.raises(ValueError):
            parse_route(bad)


def test_link_table_rules() -> None:
    table = LinkTable()
    assert not table.is_cut("producer-0", "node-1")
    table.cut("producer-0", "node-1")
    assert table.is_cut("producer-0", "node-1")
    assert not table.is_cut("producer-0", "node-2")
    assert not table.is_cut("node-1", "producer-0")
    table.cut("*", "node-3")
    assert table.is_cut("node-2", "node-3") and table.is_cut("reader-0", "node-3")
    table.uncut("*", "node-3")
    assert not table.is_cut("node-2", "node-3")

    table.delay("node-1", "*", 100)
    table.delay("*", "node-2", 250)
    assert table.delay_of("node-1", "node-3") == pytest.approx(0.1)
    assert table.delay_of("node-1", "node-2") == pytest.approx(0.25)  # largest match
    assert table.delay_of("node-3", "node-1") == 0.0
    table.delay("*", "node-2", 0)
    assert table.delay_of("node-1", "node-2") == pytest.approx(0.1)

    table.heal()
    assert not table.is_cut("producer-0", "node-1")
    assert table.delay_of("node-1", "node-3") == 0.0
    assert table.describe() == {"cuts": [], "delays": []}

    table.cut("*", "*")
    assert table.is_cut("a", "b")


def test_link_table_isolation() -> None:
    table = LinkTable()
    table.isolate_node("node-1", ["node-2", "node-3", "node-1"])
    for peer in ("node-2", "node-3"):
        assert table.is_cut("node-1", peer) and table.is_cut(peer, "node-1")
    assert not table.is_cut("node-2", "node-3")
    assert not table.is_cut("node-1", "node-1")
    assert not table.is_cut("producer-0", "node-1")

    table.isolate_client("producer-0")
    assert table.is_cut("producer-0", "node-2")
    assert not table.is_cut("producer-1", "node-2")
    table.heal()
    assert not table.is_cut("producer-0", "node-2") and not table.is_cut("node-1", "node-2")


# --- proxy over real sockets -------------------------------------------------------------


def test_forwards_bytes_unchanged() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, _, port):
            client = await Client.connect(port)
            request = frame("producer-0", b"hello")
            assert await client.roundtrip(request) == request
            # The header may arrive a byte at a time.
            for byte in frame("producer-0", b"again", correlation=2):
                await client.send(bytes([byte]))
            second = frame("producer-0", b"again", correlation=2)
            assert await asyncio.wait_for(client.reader.readexactly(len(second)), 5) == second
            stats = proxy.apply({"op": "stats"})
            assert stats["ok"] and stats["connections"] == {"producer-0>node-1": 1}
            assert stats["bytes_forwarded"] == 2 * (len(request) + len(second))
            client.close()

    run(scenario)


def test_large_payload_with_flow_control() -> None:
    async def scenario() -> None:
        async with proxied() as (_, echo, port):
            client = await Client.connect(port)
            payload = os.urandom(5 * 1024 * 1024)
            request = frame("replica-fetcher-2", payload)
            reading = asyncio.ensure_future(client.reader.readexactly(len(request)))
            await client.send(request)
            assert await asyncio.wait_for(reading, 20) == request
            assert echo.received == len(request)
            client.close()

    run(scenario)


@pytest.mark.parametrize("delay_ms", [0, 100])
def test_buffering_is_bounded_when_the_client_reads_slowly(delay_ms: int) -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, _, port):
            proxy.apply({"op": "delay", "src": "producer-0", "dst": "*", "ms": delay_ms})
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, (HOST, port))
            client = Client(*await asyncio.open_connection(sock=sock))
            request = frame("producer-0", os.urandom(24 * 1024 * 1024))
            client.writer.write(request)  # no drain: the client does not read for a while
            peak = 0
            paused = False
            for _ in range(50):
                await asyncio.sleep(0.02)
                for conn in proxy.conns:
                    for pipe in (conn.c2u, conn.u2c):
                        transport = pipe.dst.transport
                        size = transport.get_write_buffer_size() if transport else 0
                        peak = max(peak, pipe.queued, size)
                        paused = paused or pipe.reading_paused
            assert paused
            assert peak <= HIGH_WATER + 512 * 1024
            got = await asyncio.wait_for(client.reader.readexactly(len(request)), 20)
            assert got == request
            client.close()

    run(scenario)


def test_cut_blackholes_existing_connection_and_heal_resets_it() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, echo, port):
            producer = await Client.connect(port)
            fetcher = await Client.connect(port)
            assert await producer.roundtrip(frame("producer-0", b"a")) == frame("producer-0", b"a")
            request = frame("replica-fetcher-2", b"f")
            assert await fetcher.roundtrip(request) == request

            assert proxy.apply({"op": "cut", "src": "producer-0", "dst": "node-1"}) == {"ok": True}
            received = echo.received
            await producer.send(frame("producer-0", b"lost", correlation=2))
            assert await producer.silent()
            assert echo.received == received
            assert await fetcher.roundtrip(request) == request
            stats = proxy.apply({"op": "stats"})
            assert stats["blackholed"] == 1 and stats["reset"] == 0
            assert stats["cuts"] == [["producer-0", "node-1"]]

            assert proxy.apply({"op": "heal"}) == {"ok": True}
            assert await producer.closed()
            assert await fetcher.roundtrip(request) == request
            fresh = await Client.connect(port)
            assert await fresh.roundtrip(frame("producer-0", b"b")) == frame("producer-0", b"b")
            stats = proxy.apply({"op": "stats"})
            assert stats["reset"] == 1
            assert stats["connections"] == {"producer-0>node-1": 1, "node-2>node-1": 1}
            fetcher.close()
            fresh.close()

    run(scenario)


def test_new_connection_on_cut_link_never_reaches_target() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, echo, port):
            proxy.apply({"op": "isolate_client", "client": "producer-0"})
            client = await Client.connect(port)
            await client.send(frame("producer-0", b"x" * 100_000))
            assert await client.silent()
            assert echo.connections == 0 and echo.received == 0
            assert proxy.apply({"op": "stats"})["connections"] == {"producer-0>node-1": 1}
            proxy.apply({"op": "heal"})
            assert await client.closed()
            assert echo.connections == 0

    run(scenario)


def test_isolate_node_blocks_peers_not_clients() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, echo, port):
            reply = proxy.apply(
                {"op": "isolate_node", "node": "node-1", "peers": ["node-2", "node-3"]}
            )
            assert reply == {"ok": True}
            raft = await Client.connect(port)
            await raft.send(frame("pydmq-raft-2", b"vote"))
            producer = await Client.connect(port)
            request = frame("producer-0", b"p")
            assert await producer.roundtrip(request) == request
            assert await raft.silent()
            assert echo.connections == 1
            raft.close()
            producer.close()

    run(scenario)


def test_closing_blackholed_side_is_not_propagated() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, echo, port):
            client = await Client.connect(port)
            request = frame("broker-2", b"hb")
            assert await client.roundtrip(request) == request
            proxy.apply({"op": "cut", "src": "node-2", "dst": "node-1"})
            server_side = echo.writers[0]
            server_side.close()  # the node closes; the partition hides it
            assert await client.silent()
            proxy.apply({"op": "heal"})
            assert await client.closed()

    run(scenario)


def test_delay_preserves_order() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, _, port):
            client = await Client.connect(port)
            first = frame("producer-0", b"0")
            assert await client.roundtrip(first) == first
            proxy.apply({"op": "delay", "src": "producer-0", "dst": "node-1", "ms": 200})

            start = time.monotonic()
            request = frame("producer-0", b"1", correlation=1)
            assert await client.roundtrip(request) == request
            elapsed = time.monotonic() - start
            assert 0.2 <= elapsed < 2.0

            chunks = [frame("producer-0", bytes([i]) * 1000, correlation=i) for i in range(10)]
            for i, chunk in enumerate(chunks):
                await client.send(chunk)
                if i == 5:  # dropping the delay must not let later bytes overtake
                    proxy.apply({"op": "heal"})
            expected = b"".join(chunks)
            got = await asyncio.wait_for(client.reader.readexactly(len(expected)), 5)
            assert got == expected

            start = time.monotonic()
            assert await client.roundtrip(first) == first
            assert time.monotonic() - start < 0.2
            client.close()

    run(scenario)


def test_upstream_down_closes_client() -> None:
    async def scenario() -> None:
        async with proxied(target_port=free_port()) as (proxy, _, port):
            client = await Client.connect(port)
            await client.send(frame("producer-0", b"x"))
            assert await client.closed()
            await asyncio.sleep(0.05)
            assert proxy.apply({"op": "stats"})["connections"] == {}

    run(scenario)


def test_upstream_close_closes_client() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, echo, port):
            client = await Client.connect(port)
            request = frame("member-1", b"join")
            assert await client.roundtrip(request) == request
            echo.writers[0].close()
            assert await client.closed()
            await asyncio.sleep(0.05)
            assert proxy.apply({"op": "stats"})["connections"] == {}

    run(scenario)


def test_bad_commands() -> None:
    async def scenario() -> None:
        async with proxied() as (proxy, _, _port):
            assert proxy.apply({"op": "explode"})["ok"] is False
            assert proxy.apply({"op": "cut", "src": "a"})["ok"] is False
            assert proxy.apply({"op": "delay", "src": "a", "dst": "b", "ms": "x"})["ok"] is False
            assert proxy.apply({"op": "isolate_node", "node": "n", "peers": "x"})["ok"] is False
            assert proxy.apply({"op": "stats"})["cuts"] == []

    run(scenario)


# --- the process -------------------------------------------------------------------------


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        with sock:
            try:
                while data := sock.recv(65536):
                    sock.sendall(data)
            except OSError:
                pass


@contextmanager
def threaded_echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer((HOST, 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def blocking_client(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=5)
    sock.settimeout(5)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_proxy_process_end_to_end(tmp_path: Path) -> None:
    log_path = tmp_path / "proxy.log"
    with threaded_echo() as echo_port:
        proxy = ProxyProcess([Route("node-1", HOST, 0, HOST, echo_port)], log_path=log_path)
        with proxy:
            pid = proxy.pid
            assert pid is not None and len(proxy.ports) == 1
            port = proxy.ports[0]
            stats = proxy.command({"op": "stats"})
            assert stats["ok"] is True and stats["connections"] == {}
            assert "id" not in stats

            sock = blocking_client(port)
            request = frame("producer-0", b"hello")
            sock.sendall(request)
            assert recv_exactly(sock, len(request)) == request
            assert proxy.command({"op": "stats"})["connections"] == {"producer-0>node-1": 1}

            assert proxy.command({"op": "cut", "src": "producer-0", "dst": "*"}) == {"ok": True}
            sock.sendall(request)
            sock.settimeout(SILENCE)
            with pytest.raises(TimeoutError):
                sock.recv(1)
            assert proxy.command({"op": "heal"}) == {"ok": True}
            sock.settimeout(5)
            with suppress(ConnectionResetError):
                assert sock.recv(1) == b""
            sock.close()

            sock = blocking_client(port)
            sock.sendall(request)
            assert recv_exactly(sock, len(request)) == request
            sock.close()
            assert proxy.command({"op": "nope"})["ok"] is False
        assert proxy.pid is None
        assert proxy.returncode == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert "rule change" in log_path.read_text()


def test_proxy_process_exits_on_sigterm() -> None:

    with threaded_echo() as echo_port:
        proxy = ProxyProcess([Route("node-1", HOST, 0, HOST, echo_port)])
        proxy.start()
        try:
            assert proxy.pid is not None
            os.kill(proxy.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while proxy.returncode is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proxy.returncode == 0
            with pytest.raises(RuntimeError, match="exited"):
                proxy.command({"op": "stats"}, timeout=5)
        finally:
            proxy.stop()
        assert proxy.returncode == 0
