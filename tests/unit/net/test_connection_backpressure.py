"""A client that sends requests but does not read its responses must not make the broker
queue a response for every request it already received.

Small requests (a Fetch is ~100 bytes) arrive many to one socket read; each may answer with
megabytes. Once the transport says "pause writing", the connection stops handling the frames
left in its buffer and handles them when the client has read (``resume_writing``).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from pydmq.net.connection import _CORK_BYTES, KafkaConnection

RESPONSE = b"r" * 1000
HIGH_WATER = 3000  # the fake transport pauses writing above this many unread bytes


class FakeTransport:
    def __init__(self) -> None:
        self.protocol: KafkaConnection | None = None
        self.buffered = 0
        self.written = 0
        self.reading = True
        self.paused_writing = False

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.buffered += len(data)
        self.written += 1
        if self.buffered > HIGH_WATER and not self.paused_writing:
            self.paused_writing = True
            assert self.protocol is not None
            self.protocol.pause_writing()

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(bytes(p) for p in parts))

    def client_reads_everything(self) -> None:
        self.buffered = 0
        if self.paused_writing:
            self.paused_writing = False
            assert self.protocol is not None
            self.protocol.resume_writing()

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        pass


def _frames(count: int) -> bytes:
    body = b"\x00\x01\x00\x0c" + b"x" * 96  # shape only: the fake dispatcher does not decode
    return b"".join(len(body).to_bytes(4, "big") + body for _ in range(count))


def _connection() -> tuple[KafkaConnection, FakeTransport, list[int]]:
    handled: list[int] = []

    def dispatch(frame: memoryview, _connection: KafkaConnection) -> list[bytes]:
        handled.append(len(frame))
        return [RESPONSE]

    connection = KafkaConnection(dispatch, 1 << 20, "PLAINTEXT")
    transport = FakeTransport()
    transport.protocol = connection
    connection.connection_made(cast(asyncio.BaseTransport, transport))
    return connection, transport, handled


def _feed(connection: KafkaConnection, data: bytes) -> None:
    while data:
        buffer = connection.get_buffer(len(data))
        n = min(len(buffer), len(data))
        buffer[:n] = data[:n]
        connection.buffer_updated(n)
        data = data[n:]


def test_frames_already_received_wait_while_the_client_does_not_read() -> None:
    connection, transport, handled = _connection()
    _feed(connection, _frames(600))
    # The answers of one read are written together at its end, or once they pass _CORK_BYTES:
    # that write passes the high-water mark, and the frames still in the buffer wait.
    assert len(handled) < 600
    assert transport.buffered <= _CORK_BYTES + len(RESPONSE)
    assert not transport.reading
    while len(handled) < 600:
        served = len(handled)
        transport.client_reads_everything()
        assert len(handled) > served  # the held frames are served as the client reads
        assert transport.buffered <= _CORK_BYTES + len(RESPONSE)
    transport.client_reads_everything()
    assert transport.reading


def test_a_reading_client_is_served_at_once() -> None:
    connection, transport, handled = _connection()
    for _ in range(50):
        _feed(connection, _frames(1))
        transport.client_reads_everything()
    assert len(handled) == 50
    assert transport.reading
