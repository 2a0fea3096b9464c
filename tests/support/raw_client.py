"""A tiny blocking Kafka client that speaks raw frames through pydmq's own codecs.

Used by the bad-input and protocol-probe tests: it can send any bytes (garbage, hostile
length prefixes, truncated frames) and also well-formed requests built from the generated
message classes, and it reads back exactly one response frame. Every socket operation is
bounded by a timeout; nothing here retries.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Any

from pydmq.protocol import framing
from pydmq.protocol.framing import SIZE, finish_frame, start_frame
from pydmq.protocol.headers import (
    encode_request_header,
    parse_response_header,
    response_correlation_id,
)
from pydmq.protocol.messages import API_SCHEMAS

__all__ = ["RawClient", "RawResponse", "decode_response_frame", "encode_request_frame"]


def encode_request_frame(
    api_key: int,
    version: int,
    request: Any,
    correlation_id: int,
    client_id: str | None = "pydmq-raw",
    *,
    header_version: int | None = None,
) -> bytes:
    """Size prefix + request header (v1 or v2 as the pair requires, unless ``header_version``
    forces one) + encoded body."""
    return bytes(
        framing.encode_request_frame(
            api_key, version, request, correlation_id, client_id, header_version=header_version
        )
    )


def encode_raw_frame(
    api_key: int,
    version: int,
    correlation_id: int,
    body: bytes,
    client_id: str | None = "pydmq-raw",
    *,
    flexible_header: bool = False,
) -> bytes:
    """A frame with a hand-made body (for requests our encoder would refuse to build)."""
    w = start_frame()
    encode_request_header(
        w, api_key, version, correlation_id, client_id, header_version=2 if flexible_header else 1
    )
    w.raw(body)
    return bytes(finish_frame(w))


@dataclass
class RawResponse:
    correlation_id: int
    body: Any
    frame: bytes
    trailing: int  # bytes left after decoding the body (should be 0)


def decode_response_frame(frame: bytes, api_key: int, version: int) -> RawResponse:
    """Decode a response frame (without its size prefix) with our response decoder."""
    correlation_id = response_correlation_id(frame)
    r = parse_response_header(frame, api_key, version)
    body = API_SCHEMAS[api_key].decode_response(r, version)
    return RawResponse(correlation_id, body, frame, r.remaining)


class RawClient:
    """One TCP connection; ``request()`` sends one request and reads its response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.timeout = timeout
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._correlation = 0

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    # -- raw bytes ---------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def _recv_exact(self, n: int, deadline: float) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out reading {n} bytes (got {len(chunks)})")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(n - len(chunks))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            chunks += chunk
        return bytes(chunks)

    def read_frame(self, timeout: float | None = None) -> bytes | None:
        """One response frame (without the size prefix), or None if the peer closed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        head = self._recv_exact(SIZE.size, deadline)
        if head is None:
            return None
        (size,) = SIZE.unpack(head)
        assert 0 <= size < 64 * 1024 * 1024, f"absurd response size {size}"
        return self._recv_exact(size, deadline)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True if the peer closes the connection within ``timeout`` without sending anything."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
            if not data:
                return True
            raise AssertionError(
                f"expected the connection to close, got {len(data)} bytes: {data[:64]!r}"
            )

    def is_open(self, timeout: float = 0.3) -> bool:
        """True when the peer neither closed nor sent anything within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            return True
        except OSError:
            return False
        return bool(data)

    # -- requests ----------------------------------------------------------------------
    def request(
        self,
        api_key: int,
        version: int,
        request: Any | None = None,
        *,
        client_id: str | None = "pydmq-raw",
        timeout: float | None = None,
    ) -> RawResponse:
        """Send one request and decode its response; raises if the connection closes."""
        if request is None:
            request = API_SCHEMAS[api_key].request_type()
        correlation_id = self.next_correlation_id()
        self.send(encode_request_frame(api_key, version, request, correlation_id, client_id))
        frame = self.read_frame(timeout)
        if frame is None:
            raise ConnectionError(
                f"broker closed the connection instead of answering api {api_key} v{version}"
            )
        response = decode_response_frame(frame, api_key, version)
        if response.correlation_id != correlation_id:
            raise AssertionError(
                f"correlation id {response.correlation_id} != {correlation_id} (api {api_key} v{version})"
            )
        return response

    def send_request_no_response(self, api_key: int, version: int, request: Any) -> int:
        correlation_id = self.next_correlation_id()
        self.send(encode_request_frame(api_key, version, request, correlation_id))
        return correlation_id
