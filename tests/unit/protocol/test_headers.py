"""Request/response headers and golden ApiVersions frames as real clients send them."""

from __future__ import annotations

import pytest

from pydmq.protocol.errors import MalformedFrameError, UnsupportedVersionError
from pydmq.protocol.headers import (
    encode_response_header,
    parse_request_header,
    request_header_version,
    response_header_version,
)
from pydmq.protocol.messages import api_versions, produce
from pydmq.protocol.primitives import Reader, Writer

# ApiVersions v0 (header v1): api_key 18, version 0, correlation id 1, client id "rdkafka".
GOLDEN_API_VERSIONS_V0 = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x07rdkafka"

# ApiVersions v3 (header v2) as the Java client sends it: legacy client id string, empty
# header tagged fields, then compact client_software_name/version and empty tagged fields.
GOLDEN_API_VERSIONS_V3 = (
    b"\x00\x12\x00\x03\x00\x00\x00\x2a"
    + b"\x00\x0dadminclient-1"
    + b"\x00"
    + b"\x12apache-kafka-java"
    + b"\x063.7.0"
    + b"\x00"
)


def test_golden_api_versions_v0() -> None:
    frame = memoryview(GOLDEN_API_VERSIONS_V0)
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 0, 1)
    assert header.client_id == "rdkafka"
    assert header.header_version == 1
    assert offset == len(frame)
    body = api_versions.decode_request(Reader(frame, offset), 0)
    assert body.client_software_name == ""


def test_golden_api_versions_v3() -> None:
    frame = memoryview(GOLDEN_API_VERSIONS_V3)
    header, offset = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 42)
    assert header.client_id == "adminclient-1"
    assert header.header_version == 2
    reader = Reader(frame, offset)
    body = api_versions.decode_request(reader, 3)
    assert body.client_software_name == "apache-kafka-java"
    assert body.client_software_version == "3.7.0"
    assert reader.remaining == 0
    w = Writer()
    api_versions.encode_request(w, body, 3)
    assert w.getvalue() == GOLDEN_API_VERSIONS_V3[offset:]


def test_header_tagged_fields_kept() -> None:
    frame = memoryview(
        b"\x00\x12\x00\x03\x00\x00\x00\x01\xff\xff" + b"\x01\x03\x02hi" + b"\x01\x01\x00"
    )
    header, offset = parse_request_header(frame)
    assert header.client_id is None
    assert header.unknown_tagged_fields == {3: b"hi"}
    assert offset == 15


def test_unknown_version_reads_no_tagged_fields() -> None:
    # ApiVersions v99: not a known version, so no tagged fields are read.
    frame = memoryview(b"\x00\x12\x00\x63\x00\x00\x00\x01\xff\xff\x05")
    header, offset = parse_request_header(frame)
    assert header.header_version == 1
    assert offset == 10
    with pytest.raises(UnsupportedVersionError):
        api_versions.decode_request(Reader(frame, offset), 99)


@pytest.mark.parametrize(
    "data",
    [b"\x00\x12\x00", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x09abc", b"\x00" * 8 + b"\xff\xf0"],
)
def test_malformed_headers(data: bytes) -> None:
    with pytest.raises(MalformedFrameError):
        parse_request_header(memoryview(data))


def test_header_versions() -> None:
    assert request_header_version(0, 8) == 1
    assert request_header_version(0, 9) == 2
    assert response_header_version(0, 9) == 1
    assert response_header_version(0, 8) == 0
    assert response_header_version(18, 3) == 0  # ApiVersions: always v0
    assert response_header_version(18, 4) == 0
    assert request_header_version(18, 3) == 2
    assert request_header_version(1000, 0) == 1
    assert encode_response_header(7, 18, 3) == b"\x00\x00\x00\x07"
    assert encode_response_header(7, 3, 12) == b"\x00\x00\x00\x07\x00"


def test_produce_records_zero_copy() -> None:
    req = produce.ProduceRequest(
        acks=-1,
        timeout=1000,
        topic_data=[
            produce.TopicProduceData(
                name="t",
                partition_data=[produce.PartitionProduceData(index=0, records=b"R" * 64)],
            )
        ],
    )
    w = Writer()
    produce.encode_request(w, req, 9)
    buf = bytearray(w.buf)
    out = produce.decode_request(Reader(buf), 9)
    records = out.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is buf
    assert bytes(records) == b"R" * 64
