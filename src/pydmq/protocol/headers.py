"""Request and response headers (hand-written: this runs for every frame)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from pydmq.protocol.budgets import HEADER_DECODE_BUDGET
from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer

__all__ = [
    "API_VERSIONS_KEY",
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "parse_response_header",
    "request_header_version",
    "response_correlation_id",
    "response_header_version",
]

API_VERSIONS_KEY = 18

_HEAD = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_CORR = struct.Struct(">i")

# (api_key -> first flexible version) for the keys we have schemas for.
_FLEXIBLE_MIN: dict[int, int] = {k: s.flexible_min_version for k, s in API_SCHEMAS.items()}
_RANGE: dict[int, tuple[int, int]] = {
    k: (s.min_version, s.max_version) for k, s in API_SCHEMAS.items()
}


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    unknown_tagged_fields: dict[int, bytes] = field(default_factory=dict)


def _is_flexible(api_key: int, api_version: int) -> bool:
    """True only for a known (api_key, api_version) pair at or past its flexible version."""
    rng = _RANGE.get(api_key)
    if rng is None or not rng[0] <= api_version <= rng[1]:
        return False
    return api_version >= _FLEXIBLE_MIN[api_key]


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible requests, else 1."""
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible responses, else 0; ApiVersions responses always use v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


def parse_request_header(frame: memoryview) -> tuple[RequestHeader, int]:
    """Parse the request header at the start of ``frame`` (the bytes after the size prefix).

    Returns the header and the offset where the body starts. Tagged fields are read only
    when the (api_key, api_version) pair is known and flexible; for an unknown key or a
    version out of range the caller answers UNSUPPORTED_VERSION (or closes). Unknown tagged
    fields are kept, at most :data:`~pydmq.protocol.budgets.HEADER_DECODE_BUDGET` of them
    (DecodeBudgetExceededError past it).
    """
    n = len(frame)
    if n < 10:
        raise MalformedFrameError("request header truncated")
    api_key, api_version, correlation_id, client_len = _HEAD.unpack_from(frame, 0)
    pos = 10
    client_id: str | None
    if client_len < 0:
        if client_len != -1:
            raise MalformedFrameError(f"negative client_id length {client_len}")
        client_id = None
    else:
        end = pos + client_len
        if end > n:
            raise MalformedFrameError("client_id truncated")
        try:
            client_id = str(frame[pos:end], "utf-8")
        except UnicodeDecodeError:
            raise MalformedFrameError("client_id is not valid UTF-8") from None
        pos = end
    if _is_flexible(api_key, api_version):
        if pos < n and frame[pos] == 0:  # the common case: no tagged fields
            return RequestHeader(api_key, api_version, correlation_id, client_id, 2), pos + 1
        r = Reader(frame, pos, budget=HEADER_DECODE_BUDGET)
        tags = r.tagged_fields()
        return RequestHeader(api_key, api_version, correlation_id, client_id, 2, tags), r.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, 1), pos


def encode_response_header(correlation_id: int, api_key: int, api_version: int) -> bytes:
    """Response header bytes: v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    if response_header_version(api_key, api_version) == 1:
        return _CORR.pack(correlation_id) + b"\x00"
    return _CORR.pack(correlation_id)


def encode_request_header(
    w: Writer,
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    *,
    header_version: int | None = None,
) -> None:
    """Append a request header to ``w``: v1, or v2 (plus an empty tagged-field section).

    ``header_version`` None: the one the (api_key, api_version) pair requires. Tests that send
    hostile frames give another one.
    """
    w.int16(api_key)
    w.int16(api_version)
    w.int32(correlation_id)
    w.nullable_string(client_id)
    if header_version is None:
        header_version = request_header_version(api_key, api_version)
    if header_version >= 2:
        w.tagged_fields({})


def parse_response_header(
    frame: bytes | bytearray | memoryview, api_key: int, api_version: int
) -> Reader:
    """A reader of ``frame`` (a response without its size prefix) positioned at the body.

    Reads the correlation id (call :func:`response_correlation_id` first to learn which request
    it answers) and, for a v1 header, the tagged-field section; ProtocolError if they are
    truncated or malformed.
    """
    r = Reader(frame)
    r.int32()
    if response_header_version(api_key, api_version) >= 1:
        r.tagged_fields()
    return r


def response_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (without its size prefix); ProtocolError if the
    frame is shorter than one."""
    return Reader(frame).int32()
