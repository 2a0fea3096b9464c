"""The dispatcher refuses a request over its decode budget before its handler is called.

Hostile frames (millions of empty elements, tagged-field floods) reach a RequestDispatcher
with recording handlers and no broker: the handler must not run, the connection is closed
(no top-level error code in the response) or answered INVALID_REQUEST (one in it), and the
warning is logged once per connection. A request within its budget but past the inline
budget is decoded and encoded on the dispatcher's thread and handled on the loop, with the
same result as an inline one.

The budget API is imported inside the tests that need it, so that on a tree without budgets
the hostile cases fail on what they check (the handler ran), not on an import.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import sys
import threading
from pathlib import Path
from typing import Any, cast

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydmq.api import dispatcher as dispatcher_module
from pydmq.api.dispatcher import RequestDispatcher
from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.net.connection import CloseConnection
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.api_versions import ApiVersionsResponse
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataResponse
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from pydmq.security.principal import ANONYMOUS
from support.hostile_requests import SHAPES, header_tag_flood_frame, tag_flood_body
from support.raw_client import decode_response_frame, encode_raw_frame, encode_request_frame

pytestmark = pytest.mark.timeout(120)

HOSTILE_ELEMENTS = 1_000_000  # past every API's budget (Fetch: 110,000)


def _budget(api_key: int) -> int:
    from pydmq.protocol.budgets import decode_budget  # imported late: see the module notes

    return decode_budget(api_key)


def _inline_budget() -> int:
    return int(dispatcher_module.INLINE_DECODE_BUDGET)


class _Connection:
    """What the dispatcher reads of a connection."""

    def __init__(self, connection_id: int) -> None:
        self.connection_id = connection_id
        self.client_host = "192.0.2.7"
        self.client_port = 40000 + connection_id
        self.listener = "PLAINTEXT"
        self.principal = ANONYMOUS
        self.received_at = 0.0  # dispatched as it arrived
        self.authenticator = None


class _Recorder:
    """Handlers for every API key that record what they were given and answer a default."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.threads: list[int] = []

    def spec(self, api_key: int) -> ApiHandlerSpec:
        schema = API_SCHEMAS[api_key]

        def handle(ctx: RequestContext[None], request: Any) -> Any:
            self.requests.append(request)
            self.threads.append(threading.get_ident())
            return schema.response_type()

        return ApiHandlerSpec(api_key, schema.min_version, schema.max_version, handle)


def _dispatcher(recorder: _Recorder) -> RequestDispatcher[None]:
    handlers = {key: recorder.spec(key) for key in {s.api_key for s in SHAPES} | {3}}
    return RequestDispatcher(None, handlers, ApiVersionsResponse)


def _frame(api_key: int, version: int, body: bytes) -> memoryview:
    flexible = API_SCHEMAS[api_key].is_flexible(version)
    raw = encode_raw_frame(api_key, version, 5, body, "hostile", flexible_header=flexible)
    return memoryview(bytearray(raw[4:]))


def _call(dispatcher: RequestDispatcher, frame: memoryview, connection: _Connection) -> Any:
    return dispatcher(frame, cast(Any, connection))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s.name}-v{s.version}")
def test_hostile_request_never_reaches_its_handler(shape: Any) -> None:
    recorder = _Recorder()
    frame = _frame(shape.api_key, shape.version, shape.body(HOSTILE_ELEMENTS))
    try:
        answer = _call(_dispatcher(recorder), frame, _Connection(1))
    except CloseConnection:
        answer = None
    assert recorder.requests == [], "the handler ran with the hostile request"
    if answer is None:  # closed: only when the response has no top-level error code
        assert API_SCHEMAS[shape.api_key].error_response(shape.version, 42) is None
        return
    assert isinstance(answer, list), "refused requests are answered at once"
    size = struct.unpack_from(">i", answer[0])[0]
    response = decode_response_frame(bytes(answer[0][4 : 4 + size]), shape.api_key, shape.version)
    assert response.correlation_id == 5
    assert response.body.error_code == ErrorCode.INVALID_REQUEST


def test_produce_over_budget_closes_and_fetch_answers_invalid_request() -> None:
    recorder = _Recorder()
    dispatcher = _dispatcher(recorder)
    produce = next(s for s in SHAPES if s.api_key == 0 and s.version == 9)
    with pytest.raises(CloseConnection):
        _call(dispatcher, _frame(0, 9, produce.body(_budget(0) + 1)), _Connection(1))
    assert API_SCHEMAS[0].error_response(9, 42) is None  # Produce has no top-level error
    fetch = next(s for s in SHAPES if s.api_key == 1 and s.version == 12)
    answer = _call(dispatcher, _frame(1, 12, fetch.body(_budget(1) + 1)), _Connection(2))
    body = decode_response_frame(bytes(answer[0][4:]), 1, 12).body
    assert isinstance(body, FetchResponse) and body.error_code == ErrorCode.INVALID_REQUEST
    assert recorder.requests == []


def test_header_tag_flood_closes_before_the_body_is_read() -> None:
    recorder = _Recorder()
    body = tag_flood_body(3, 9, MetadataRequest(topics=None), 0)
    frame = header_tag_flood_frame(3, 9, body, HOSTILE_ELEMENTS)
    with pytest.raises(CloseConnection):
        _call(_dispatcher(recorder), memoryview(bytearray(frame[4:])), _Connection(1))
    assert recorder.requests == []


def test_warning_once_per_connection_with_the_client_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatcher = _dispatcher(_Recorder())
    fetch = next(s for s in SHAPES if s.api_key == 1 and s.version == 12)
    frame = _frame(1, 12, fetch.body(_budget(1) + 1))
    first, second = _Connection(1), _Connection(2)
    with caplog.at_level(logging.WARNING, logger=dispatcher_module.__name__):
        for connection in (first, first, first, second):
            _call(dispatcher, frame, connection)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 2
    assert "192.0.2.7:40001" in lines[0] and "INVALID_REQUEST" in lines[0]
    assert "192.0.2.7:40002" in lines[1]


def test_request_past_the_inline_budget_is_decoded_off_the_loop() -> None:
    recorder = _Recorder()
    dispatcher = _dispatcher(recorder)
    partitions = _inline_budget() + 10
    request = FetchRequest(
        replica_id=-1,
        max_bytes=1 << 20,
        topics=[
            FetchTopic(
                topic="t", partitions=[FetchPartition(partition=i) for i in range(partitions)]
            )
        ],
    )
    frame = memoryview(bytearray(encode_request_frame(1, 12, request, 5)[4:]))

    async def scenario() -> tuple[Any, int]:
        answer = _call(dispatcher, frame, _Connection(1))
        assert not isinstance(answer, list), "past the inline budget the answer is a future"
        frame[:] = b"\x00" * len(frame)  # the receive buffer is reused: the thread has a copy
        return await answer, threading.get_ident()

    buffers, loop_thread = asyncio.run(scenario())
    assert recorder.requests == [request]
    assert recorder.threads == [loop_thread]  # handled on the loop
    response = decode_response_frame(bytes(buffers[0][4:]), 1, 12)
    assert response.correlation_id == 5 and response.body == FetchResponse()


def test_request_within_the_inline_budget_is_handled_at_once() -> None:
    recorder = _Recorder()
    request = MetadataRequest(topics=None)
    frame = memoryview(bytearray(encode_request_frame(3, 12, request, 5)[4:]))
    answer = _call(_dispatcher(recorder), frame, _Connection(1))
    assert isinstance(answer, list)
    assert recorder.requests == [request]
    body = decode_response_frame(bytes(answer[0][4:]), 3, 12).body
    assert body == MetadataResponse()


def test_produce_records_decoded_off_the_loop_stay_writable() -> None:
    """Produce patches offsets in place: the copy the thread decodes from is a bytearray."""
    topics = [TopicProduceData(name="t", partition_data=[]) for _ in range(_inline_budget())]
    topics.append(
        TopicProduceData(name="u", partition_data=[PartitionProduceData(index=0, records=b"abc")])
    )
    request = ProduceRequest(acks=1, timeout=1000, topic_data=topics)
    frame = memoryview(bytearray(encode_request_frame(0, 9, request, 5)[4:]))
    recorder = _Recorder()

    async def scenario() -> Any:
        return await _call(_dispatcher(recorder), frame, _Connection(1))

    buffers = asyncio.run(scenario())
    (decoded,) = recorder.requests
    assert decoded == request
    records = decoded.topic_data[-1].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    assert decode_response_frame(bytes(buffers[0][4:]), 0, 9).body == ProduceResponse()
