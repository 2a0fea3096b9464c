"""Client-side framing (``protocol/framing.py`` and the request/response header functions of
``protocol/headers.py``): the one implementation every pydmq client and the tests' raw client
use (issue 16). Checked against frames as real clients send them and against the server's own
parser."""

from __future__ import annotations

import pytest

from pydmq.protocol.errors import MalformedFrameError
from pydmq.protocol.framing import SIZE, encode_request_frame, response_size
from pydmq.protocol.headers import (
    encode_response_header,
    parse_request_header,
    parse_response_header,
    response_correlation_id,
)
from pydmq.protocol.messages import api_versions, metadata
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.primitives import Writer

pytestmark = pytest.mark.timeout(30)


def test_a_v1_request_frame_is_what_librdkafka_sends() -> None:
    frame = encode_request_frame(18, 0, ApiVersionsRequest(), 1, "rdkafka")
    # size 17, ApiVersions v0, correlation id 1, client id "rdkafka", empty body
    assert bytes(frame) == b"\x00\x00\x00\x11\x00\x12\x00\x00\x00\x00\x00\x01\x00\x07rdkafka"


def test_a_v2_request_frame_is_what_the_java_client_sends() -> None:
    request = ApiVersionsRequest(
        client_software_name="apache-kafka-java", client_software_version="3.7.0"
    )
    frame = encode_request_frame(18, 3, request, 42, "adminclient-1")
    body = (
        b"\x00\x12\x00\x03\x00\x00\x00\x2a\x00\x0dadminclient-1\x00"
        + b"\x12apache-kafka-java\x063.7.0\x00"
    )
    assert bytes(frame) == SIZE.pack(len(body)) + body


@pytest.mark.parametrize(("version", "header_version"), [(0, 1), (9, 2), (12, 2)])
def test_the_server_parses_what_a_client_frames(version: int, header_version: int) -> None:
    request = metadata.MetadataRequest(topics=None)
    frame = encode_request_frame(3, version, request, 7, None)
    assert SIZE.unpack_from(frame)[0] == len(frame) - SIZE.size
    header, _ = parse_request_header(memoryview(frame)[SIZE.size :])
    assert (header.api_key, header.api_version, header.correlation_id) == (3, version, 7)
    assert (header.client_id, header.header_version) == (None, header_version)


def test_a_forced_header_version_is_kept() -> None:
    flexible = encode_request_frame(3, 12, metadata.MetadataRequest(), 7, "c")
    forced = encode_request_frame(3, 12, metadata.MetadataRequest(), 7, "c", header_version=1)
    assert len(forced) == len(flexible) - 1  # no tagged-field section in the header


@pytest.mark.parametrize(("api_key", "version"), [(18, 3), (3, 12), (3, 0)])
def test_response_header_and_body(api_key: int, version: int) -> None:
    w = Writer()
    w.raw(encode_response_header(99, api_key, version))
    response = api_versions.ApiVersionsResponse() if api_key == 18 else metadata.MetadataResponse()
    module = api_versions if api_key == 18 else metadata
    module.encode_response(w, response, version)
    frame = w.getvalue()
    assert response_correlation_id(frame) == 99
    reader = parse_response_header(frame, api_key, version)
    assert module.decode_response(reader, version) == response
    assert reader.remaining == 0


def test_response_size_bounds() -> None:
    assert response_size(SIZE.pack(4), 100) == 4
    assert response_size(SIZE.pack(100), 100) == 100
    for size in (-1, 0, 3, 101):
        with pytest.raises(MalformedFrameError, match=f"invalid response size {size}"):
            response_size(SIZE.pack(size), 100)


def test_a_truncated_response_header_is_a_protocol_error() -> None:
    with pytest.raises(MalformedFrameError):
        response_correlation_id(b"\x00\x00")
    with pytest.raises(MalformedFrameError):
        parse_response_header(b"\x00\x00\x00\x01", 3, 12)  # v1 header without its tags
