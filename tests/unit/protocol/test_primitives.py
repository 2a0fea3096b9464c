"""Bounded decoding: every length and count is checked against the remaining bytes."""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydmq.protocol.errors import ErrorCode, MalformedFrameError, ProtocolError, retriable
from pydmq.protocol.messages import produce
from pydmq.protocol.primitives import Reader, Writer


def test_malformed_is_protocol_error() -> None:
    assert issubclass(MalformedFrameError, ProtocolError)


def test_error_codes() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.SHARE_SESSION_LIMIT_REACHED == 133
    assert retriable(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert not retriable(ErrorCode.UNSUPPORTED_VERSION)


@pytest.mark.parametrize(
    "method",
    [
        "array_length",
        "nullable_array_length",
    ],
)
def test_huge_array_count_rejected_without_allocation(method: str) -> None:
    data = struct.pack(">i", 0x7FFFFFFF) + b"\x00\x00\x00\x00"
    start = time.perf_counter()
    with pytest.raises(MalformedFrameError):
        getattr(Reader(data), method)()
    assert time.perf_counter() - start < 0.1


def test_huge_compact_array_count_rejected() -> None:
    w = Writer()
    w.uvarint(0x7FFFFFFF)
    w.raw(b"\x00" * 4)
    with pytest.raises(MalformedFrameError):
        Reader(w.getvalue()).compact_array_length()


def test_huge_array_in_a_produce_request() -> None:
    # acks, timeout, then topic_data with an absurd count and 4 bytes left (v8, non flexible).
    body = b"\xff\xff" + b"\x00\x01" + struct.pack(">i", 1000) + struct.pack(">i", 0x7FFFFFFF)
    body += b"\x00" * 4
    with pytest.raises(MalformedFrameError):
        produce.decode_request(Reader(body), 8)


def test_fixed_size_array_bounded() -> None:
    r = Reader(b"\x00" * 7)
    with pytest.raises(MalformedFrameError):
        r.int32_array(2)


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("int8", b""),
        ("int16", b"\x00"),
        ("int32", b"\x00\x00\x00"),
        ("int64", b"\x00" * 7),
        ("uuid", b"\x00" * 15),
        ("string", b"\x00\x05abc"),
        ("nullable_string", b"\x00\x05abc"),
        ("compact_string", b"\x06abc"),
        ("bytes", b"\x00\x00\x00\x05abc"),
        ("records", b"\x00\x00\x00\x05abc"),
        ("compact_records", b"\x06abc"),
        ("uvarint", b"\x80\x80"),
        ("tagged_fields", b"\x01\x00\x05ab"),
    ],
)
def test_truncated(method: str, data: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        getattr(Reader(data), method)()


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("nullable_string", b"\xff\xfe"),
        ("string", b"\xff\xff"),
        ("nullable_bytes", b"\xff\xff\xff\xfe"),
        ("records", b"\xff\xff\xff\xfe"),
        ("array_length", b"\xff\xff\xff\xff"),
        ("nullable_array_length", b"\xff\xff\xff\xfe"),
        ("compact_string", b"\x00"),
    ],
)
def test_negative_lengths(method: str, data: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        getattr(Reader(data), method)()


def test_null_markers() -> None:
    assert Reader(b"\xff\xff").nullable_string() is None
    assert Reader(b"\xff\xff\xff\xff").records() is None
    assert Reader(b"\x00").compact_records() is None
    assert Reader(b"\xff\xff\xff\xff").nullable_array_length() == -1
    assert Reader(b"\x00").compact_nullable_array_length() == -1


def test_invalid_utf8() -> None:
    with pytest.raises(MalformedFrameError):
        Reader(b"\x00\x02\xff\xfe").string()


def test_varint_too_long() -> None:
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff\xff\xff\xff\x7f").uvarint()  # > 32 bits
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff" * 6).uvarint()
    with pytest.raises(MalformedFrameError):
        Reader(b"\xff" * 11).uvarlong()


def test_records_are_zero_copy() -> None:
    data = bytearray(b"\x00\x00\x00\x03abcZ")
    view = Reader(data).records()
    assert isinstance(view, memoryview)
    assert view.obj is data
    assert bytes(view) == b"abc"


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_uvarint_round_trip(n: int) -> None:
    w = Writer()
    w.uvarint(n)
    r = Reader(w.getvalue())
    assert r.uvarint() == n
    assert r.remaining == 0


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varint_round_trip(n: int) -> None:
    w = Writer()
    w.varint(n)
    assert Reader(w.getvalue()).varint() == n


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    w = Writer()
    w.varlong(n)
    assert Reader(w.getvalue()).varlong() == n


@given(st.text(max_size=50), st.none() | st.text(max_size=20), st.binary(max_size=30))
def test_string_bytes_round_trip(s: str, ns: str | None, b: bytes) -> None:
    w = Writer()
    w.string(s)
    w.compact_string(s)
    w.nullable_string(ns)
    w.compact_nullable_string(ns)
    w.bytes(b)
    w.compact_bytes(b)
    u = uuid.uuid4()
    w.uuid(u)
    r = Reader(w.getvalue())
    assert r.string() == s
    assert r.compact_string() == s
    assert r.nullable_string() == ns
    assert r.compact_nullable_string() == ns
    assert r.bytes() == b
    assert r.compact_bytes() == b
    assert r.uuid() == u
    assert r.remaining == 0


def test_unknown_tagged_fields_kept_and_reencoded() -> None:
    from pydmq.protocol.messages import api_versions

    w = Writer()
    w.compact_string("librdkafka")
    w.compact_string("2.4.0")
    # tagged fields: tag 5 (3 bytes), tag 9 (0 bytes)
    w.uvarint(2)
    w.uvarint(5)
    w.uvarint(3)
    w.raw(b"xyz")
    w.uvarint(9)
    w.uvarint(0)
    data = w.getvalue()
    msg = api_versions.decode_request(Reader(data), 3)
    assert msg.client_software_name == "librdkafka"
    assert msg.unknown_tagged_fields == {5: b"xyz", 9: b""}
    out = Writer()
    api_versions.encode_request(out, msg, 3)
    assert out.getvalue() == data


def test_known_tagged_field_size_mismatch_rejected() -> None:
    from pydmq.protocol.messages import api_versions

    # ApiVersions v3 response: tag 0 = supported_features (compact array). Claim a size
    # of 3 for a 1-byte empty array.
    w = Writer()
    w.int16(0)
    w.uvarint(1)  # empty api_keys
    w.int32(0)  # throttle
    w.uvarint(1)
    w.uvarint(0)
    w.uvarint(3)
    w.raw(b"\x01\x00\x00")
    with pytest.raises(MalformedFrameError):
        api_versions.decode_response(Reader(w.getvalue()), 3)
