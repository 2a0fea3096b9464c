"""RequestDispatcher: frame -> header -> handler -> encoded response buffers.

Kafka's rules at this boundary: an unknown API key, an unparsable header or body, or an
unsupported version of any API but ApiVersions closes the connection; ApiVersions answers an
unsupported version with UNSUPPORTED_VERSION in a v0 body listing what we support.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import struct
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydmq.broker.handler import ApiHandlerSpec, RawResponse, RequestContext
from pydmq.net.connection import CloseConnection, KafkaConnection
from pydmq.protocol.errors import ProtocolError
from pydmq.protocol.headers import encode_response_header, parse_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.scatter import ScatterWriter

if TYPE_CHECKING:
    from pydmq.broker.server import Broker

__all__ = ["RequestDispatcher"]

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_API_VERSIONS = 18

Buffers = Sequence[bytes | bytearray | memoryview]


class RequestDispatcher:
    """Owned by the broker; called by every connection for every complete frame."""

    def __init__(self, broker: Broker, handlers: Mapping[int, ApiHandlerSpec]) -> None:
        self._broker = broker
        self.handlers = dict(handlers)

    def __call__(self, frame: memoryview, connection: KafkaConnection) -> Any:
        try:
            header, body_offset = parse_request_header(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"unparsable request header: {exc}") from None
        api_key, version = header.api_key, header.api_version
        spec = self.handlers.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == _API_VERSIONS:
                return self._unsupported_api_versions(header.correlation_id)
            raise CloseConnection(f"unsupported version {version} of API key {api_key}")
        schema = API_SCHEMAS[api_key]
        try:
            request = schema.decode_request(Reader(frame, body_offset), version)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request (key {api_key} v{version}): {exc}") from None
        ctx = RequestContext(
            broker=self._broker,
            api_key=api_key,
            api_version=version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host=connection.client_host,
            client_port=connection.client_port,
            listener=connection.listener,
            connection_id=connection.connection_id,
        )
        result = spec.handle(ctx, request)
        if inspect.isawaitable(result):
            return self._finish_later(ctx, result)
        return self._encode(ctx, result)

    def _finish_later(
        self, ctx: RequestContext, result: Awaitable[Any]
    ) -> asyncio.Future[Buffers | None]:
        """Run the handler's awaitable as the task itself and encode its answer when it ends.

        Wrapping it in a second coroutine left the handler's coroutine unstarted (and warned
        "never awaited") whenever the connection or the broker stopped before the wrapper ran;
        a task owns its coroutine, so cancelling the answer cancels the handler itself.
        """
        task = asyncio.ensure_future(result)
        answer: asyncio.Future[Buffers | None] = task.get_loop().create_future()

        def settle(done: asyncio.Future[Any]) -> None:
            if answer.done():
                return
            if done.cancelled():
                answer.cancel()
                return
            exc = done.exception()
            if exc is not None:
                answer.set_exception(exc)
                return
            try:
                answer.set_result(self._encode(ctx, done.result()))
            except Exception as encode_error:  # surfaces on the connection, which closes
                answer.set_exception(encode_error)

        def cancel_handler(settled: asyncio.Future[Buffers | None]) -> None:
            if settled.cancelled():
                task.cancel()

        task.add_done_callback(settle)
        answer.add_done_callback(cancel_handler)
        return answer

    def _encode(self, ctx: RequestContext, response: Any) -> Buffers | None:
        if response is None:
            return None
        header = encode_response_header(ctx.correlation_id, ctx.api_key, ctx.api_version)
        if isinstance(response, RawResponse):
            prefix = _SIZE.pack(len(header) + response.size) + header
            return [prefix, *response.buffers]
        writer = ScatterWriter(bytearray(_SIZE.size))
        writer.buf += header
        API_SCHEMAS[ctx.api_key].encode_response(writer, response, ctx.api_version)
        if not writer.parts:
            _SIZE.pack_into(writer.buf, 0, len(writer.buf) - _SIZE.size)
            return [writer.buf]
        parts, size = writer.output()
        first = parts[0]
        assert isinstance(first, bytearray)
        _SIZE.pack_into(first, 0, size - _SIZE.size)
        return parts

    def _unsupported_api_versions(self, correlation_id: int) -> Buffers:
        from pydmq.broker.handlers.api_versions import unsupported_version_response

        writer = Writer(bytearray(_SIZE.size))
        writer.buf += encode_response_header(correlation_id, _API_VERSIONS, 0)
        API_SCHEMAS[_API_VERSIONS].encode_response(
            writer, unsupported_version_response(self._broker), 0
        )
        _SIZE.pack_into(writer.buf, 0, len(writer.buf) - _SIZE.size)
        return [writer.buf]
