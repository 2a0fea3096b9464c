"""A throttled client is muted (KIP-219): its response leaves, then none of its requests is
read or served until the throttle time has passed."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pydmq.net.connection import KafkaConnection

pytestmark = pytest.mark.timeout(30)


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(bytes(p) for p in parts))

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def close(self) -> None:
        pass


def _frame(tag: bytes) -> bytes:
    return len(tag).to_bytes(4, "big") + tag


def _feed(connection: KafkaConnection, data: bytes) -> None:
    buffer = connection.get_buffer(len(data))
    buffer[: len(data)] = data
    connection.buffer_updated(len(data))


async def _until(condition: Any, bound: float = 10.0) -> None:
    async with asyncio.timeout(bound):
        while not condition():
            await asyncio.sleep(0.01)


def test_a_muted_connection_serves_nothing_until_the_throttle_time_passed() -> None:
    async def scenario() -> None:
        handled: list[bytes] = []

        def dispatch(frame: memoryview, connection: KafkaConnection) -> list[bytes]:
            handled.append(bytes(frame))
            if bytes(frame) == b"slow":
                connection.mute_for(0.05)
            return [b"answer-" + bytes(frame)]

        connection = KafkaConnection(dispatch, 1 << 20, "PLAINTEXT")
        transport = FakeTransport()
        connection.connection_made(cast(asyncio.BaseTransport, transport))
        _feed(connection, _frame(b"slow") + _frame(b"next") + _frame(b"last"))
        # the throttled response left; the frames behind it wait, and reading stopped
        assert handled == [b"slow"]
        assert transport.written == [b"answer-slow"]
        assert not transport.reading
        await _until(lambda: len(handled) == 3)
        assert b"".join(transport.written) == b"answer-slowanswer-nextanswer-last"
        assert transport.reading

    asyncio.run(scenario())


def test_a_longer_mute_replaces_a_shorter_one_and_close_cancels_it() -> None:
    async def scenario() -> None:
        connection = KafkaConnection(lambda frame, c: None, 1 << 20, "PLAINTEXT")
        transport = FakeTransport()
        connection.connection_made(cast(asyncio.BaseTransport, transport))
        connection.mute_for(0.01)
        connection.mute_for(30.0)
        connection.mute_for(0.02)  # shorter: ignored
        await asyncio.sleep(0.1)
        assert not transport.reading
        connection.connection_lost(None)
        assert connection._unmute is None or connection._unmute.cancelled()

    asyncio.run(scenario())
