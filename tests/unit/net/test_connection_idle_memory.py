"""An idle connection pins no receive buffer: memory per connection stays small with
thousands of them open (issue 21: 10,000 idle connections).

Real sockets over loopback to a :class:`KafkaConnection` server on this test's event loop;
``tracemalloc`` counts what the Python heap holds per connection once each has been served
one request and gone idle. The receive buffer (16 KiB, zero-filled) used to stay with every
connection for its whole life.
"""

from __future__ import annotations

import asyncio
import socket
import tracemalloc

import pytest

from pydmq.net.connection import KafkaConnection

pytestmark = pytest.mark.timeout(60)

CONNECTIONS = 200
RESPONSE = [b"\x00\x00\x00\x04\x00\x00\x00\x01"]  # size 4, correlation id 1
REQUEST = (8).to_bytes(4, "big") + b"\x00\x12\x00\x03\x00\x00\x00\x01"  # 8-byte frame


def _dispatch(frame: memoryview, _connection: KafkaConnection) -> list[bytes]:
    assert bytes(frame) == REQUEST[4:]
    return RESPONSE


async def _request(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    await loop.sock_sendall(sock, REQUEST)
    got = b""
    while len(got) < len(RESPONSE[0]):
        got += await loop.sock_recv(sock, 64)
    assert got == RESPONSE[0]


async def _open(loop: asyncio.AbstractEventLoop, port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        await _request(loop, sock)
        socks.append(sock)
    return socks


async def _scenario() -> None:
    loop = asyncio.get_running_loop()
    served: list[KafkaConnection] = []

    def factory() -> KafkaConnection:
        connection = KafkaConnection(_dispatch, 1 << 20, "PLAINTEXT")
        served.append(connection)
        return connection

    server = await loop.create_server(factory, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    warm = await _open(loop, port, 20)  # the loop's first-use allocations
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        socks = await _open(loop, port, CONNECTIONS)
        await asyncio.sleep(0.05)  # the last responses' write callbacks have run
        per_connection = (tracemalloc.get_traced_memory()[0] - before) / CONNECTIONS
    finally:
        tracemalloc.stop()
    print(f"{per_connection:.0f} bytes of Python heap per idle connection")
    # An idle connection is its protocol, its transport and their bookkeeping (~2-3 KiB),
    # not a 16 KiB buffer on top.
    assert per_connection < 8 * 1024
    # An idle connection still serves its next request (a fresh buffer is taken for it).
    await _request(loop, socks[0])
    for sock in warm + socks:
        sock.close()
    server.close()
    await server.wait_closed()
    assert len(served) == 20 + CONNECTIONS


def test_idle_connections_hold_no_receive_buffer() -> None:
    asyncio.run(_scenario())
