"""Fuzzing the frame decoder: ``KafkaConnection`` fed byte streams in random chunkings.

A fake transport records writes, pauses and closes. With a recording dispatcher, any stream
cut at any points must yield exactly the frames a reference splitter finds, and close exactly
when a size prefix is negative or above the limit. With the real ``RequestDispatcher`` of an
in-process broker, mutated valid frames must be answered or closed: never an unexpected error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_harness import PAIRS, fuzz_settings, valid_request_frame
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_decoders import mutated

from pydmq.net.connection import KafkaConnection

pytestmark = pytest.mark.timeout(120)

MAX_REQUEST = 4096


class FakeTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 9) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.written.append(b"".join(bytes(p) for p in parts))

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True


def reference_split(stream: bytes) -> tuple[list[bytes], bool]:
    frames, pos = [], 0
    while len(stream) - pos >= 4:
        (size,) = struct.unpack_from(">i", stream, pos)
        if size < 0 or size > MAX_REQUEST:
            return frames, True
        if len(stream) - pos - 4 < size:
            break
        frames.append(stream[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames, False


def feed(conn: KafkaConnection, stream: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    for a, b in itertools.pairwise(points):
        chunk = stream[a:b]
        while chunk and not conn.closed:
            buf = conn.get_buffer(len(chunk))
            n = min(len(buf), len(chunk))
            buf[:n] = chunk[:n]
            conn.buffer_updated(n)
            chunk = chunk[n:]


frame_bodies = st.lists(st.binary(max_size=600), max_size=12)
bad_sizes = st.one_of(st.none(), st.sampled_from([-1, -(2**31), MAX_REQUEST + 1, 2**31 - 1]))


@fuzz_settings(1500)
@given(
    bodies=frame_bodies,
    bad=bad_sizes,
    tail=st.binary(max_size=40),
    cuts=st.lists(st.integers(0, 10**6), max_size=30),
)
def test_any_chunking_yields_the_same_frames(
    bodies: list[bytes], bad: int | None, tail: bytes, cuts: list[int]
) -> None:
    stream = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    if bad is not None:
        stream += struct.pack(">i", bad)
    stream += tail
    expected, must_close = reference_split(stream)
    seen: list[bytes] = []

    def dispatch(frame: memoryview, connection: KafkaConnection) -> list[bytes]:
        seen.append(bytes(frame))
        return [struct.pack(">i", len(frame))]

    conn = KafkaConnection(dispatch, MAX_REQUEST, "PLAINTEXT")
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    feed(conn, stream, cuts)
    assert seen == expected
    assert transport.closed == must_close
    # the answers in order (answers of one read leave in one write)
    assert b"".join(transport.written) == b"".join(struct.pack(">i", len(f)) for f in expected)


@fuzz_settings(300)
@given(stream=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 10**6), max_size=30))
def test_random_streams(stream: bytes, cuts: list[int]) -> None:
    expected, must_close = reference_split(stream)
    seen: list[bytes] = []
    conn = KafkaConnection(lambda f, c: seen.append(bytes(f)), MAX_REQUEST, "PLAINTEXT")
    transport = FakeTransport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    feed(conn, stream, cuts)
    assert seen == expected and transport.closed == must_close


# -- the real dispatcher -----------------------------------------------------------------------


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Any, asyncio.AbstractEventLoop]]:
    from pydmq.config.broker import BrokerConfig
    from pydmq.node import Node

    data: Path = tmp_path_factory.mktemp("fuzz-broker")
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "pydmq.http.listeners": "http://127.0.0.1:0",
            "log.dirs": str(data),
            "auto.create.topics.enable": "true",
            "num.partitions": 1,
        }
    )
    loop = asyncio.new_event_loop()
    node = Node(config)
    loop.run_until_complete(node.start())
    try:
        yield node.broker, loop
    finally:
        loop.run_until_complete(node.stop())
        loop.close()


def _handled_pairs() -> list[tuple[int, int]]:
    from pydmq.plugins.host import PluginHost

    handlers = PluginHost(()).api_handlers()
    return [
        (k, v)
        for k, v in PAIRS
        if k in handlers and handlers[k].min_version <= v <= handlers[k].max_version
    ]


_LIVE_FRAMES = {pair: valid_request_frame(*pair) for pair in _handled_pairs()}


def _serve(
    live: tuple[Any, asyncio.AbstractEventLoop], frame: bytes, cuts: list[int] | None = None
) -> tuple[bool, list[logging.LogRecord]]:
    """Feed one request frame to a connection of the live broker's real dispatcher (cut at
    ``cuts``, default its middle), wait a bounded time for an async answer, close it; whether
    the broker had closed it, and what was logged at ERROR meanwhile."""
    broker, loop = live
    errors = _Errors()
    closed_by_broker = False
    logging.getLogger("pydmq").addHandler(errors)
    try:
        conn = KafkaConnection(broker.dispatcher, 1 << 20, "PLAINTEXT")
        transport = FakeTransport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        stream = struct.pack(">i", len(frame)) + frame

        async def drive() -> None:
            nonlocal closed_by_broker
            feed(conn, stream, [len(stream) // 2] if cuts is None else cuts)
            for _ in range(30):  # async handlers (long polls, joins): bounded wait
                if conn._pending is None:
                    break
                await asyncio.sleep(0.01)
            closed_by_broker = transport.closed
            conn.close()
            conn.connection_lost(None)

        loop.run_until_complete(drive())
    finally:
        logging.getLogger("pydmq").removeHandler(errors)
    return closed_by_broker, errors.records


@fuzz_settings(600)
@given(frame=st.sampled_from(sorted(_LIVE_FRAMES)).flatmap(lambda p: mutated(_LIVE_FRAMES[p])))
def test_real_dispatcher_answers_or_closes(
    live: tuple[Any, asyncio.AbstractEventLoop], frame: bytes
) -> None:
    _, errors = _serve(live, frame)
    assert not errors, "\n".join(
        f"{r.getMessage()}\n{logging.Formatter().formatException(r.exc_info) if r.exc_info else ''}"
        for r in errors
    )


def test_a_request_header_over_the_decode_budget_closes_the_connection_quietly(
    live: tuple[Any, asyncio.AbstractEventLoop],
) -> None:
    """A flexible request header claiming more tagged fields than its frame could hold is over
    the decode budget: the connection is closed with one warning, and nothing fails while
    doing it (the warning's once-per-connection set once raised TypeError: the connection's
    slots had no ``__weakref__``; found by the fuzzer above)."""
    # Produce v9 (flexible: header v2): api key, version, correlation id, client id, then
    # a tagged-field count of 116 (over the header's budget of 64) with bytes enough
    # behind it for so many fields.
    frame = struct.pack(">hhih", 0, 9, 42, 4) + b"fuzz" + bytes([116]) + b"\x00" * 400
    closed_by_broker, errors = _serve(live, frame, cuts=[len(frame) + 4])
    assert closed_by_broker
    assert not errors, [r.getMessage() for r in errors]
