"""RequestDispatcher: frame -> header -> handler -> encoded response buffers.

Kafka's rules at this boundary: an unknown API key, an unparsable header or body, or an
unsupported version of any API but ApiVersions closes the connection; ApiVersions answers an
unsupported version with UNSUPPORTED_VERSION in a v0 body listing what we support.

Each body is decoded within its API key's decode budget (:mod:`pydmq.protocol.budgets`). A
request over it is refused before its elements are built: INVALID_REQUEST when the response
of that version has a top-level error code, else the connection is closed; a header over its
own budget (a flood of tagged fields) closes the connection. Either is logged once per
connection at WARNING with the client's address.

Decoding runs on the event loop for requests of up to :data:`INLINE_DECODE_BUDGET` elements
(every request of a normal workload: ~50 ms of decoding at most). A request past it but within
its API's budget (a consumer of 100,000 partitions) is decoded again, from a private copy of
its frame, on the dispatcher's decoding thread, handled on the loop once decoded (large
handlers answer in slices, giving the loop back between them), and its response encoded
on the decoding thread: the loop keeps serving the other connections meanwhile (it takes the
GIL back every switch interval, 5 ms), and one thread bounds what large requests can take to
one core.

A handler that found its client over a quota sets ``ctx.throttle_time_ms``: once the response
is encoded the connection is muted for that time, or, for a client older than KIP-219, the
response is delayed by it (:mod:`pydmq.quotas.throttling`).

With a ``request_percentage`` quota configured (``request_quota`` enabled), the time a request
takes to decode and handle, on the loop and on the decoding thread, is recorded for its client
as Kafka's request quota does (a percentage of one thread's time; the awaited parts of an
asynchronous handler are not counted), and a client over its quota gets the throttle time in
the response's ``throttle_time_ms`` (at most one quota window, as Kafka bounds it). ApiVersions
and SASL requests, and requests on ``exempt_listeners`` (the inter-broker listener), are
exempt. Without such a quota the clock is not read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import struct
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic

from pydmq.api.handler import ApiHandlerSpec, HostT, RawResponse, RequestContext
from pydmq.api.request_metrics import RequestMetrics
from pydmq.net.connection import CloseConnection, KafkaConnection
from pydmq.protocol.budgets import decode_budget
from pydmq.protocol.errors import DecodeBudgetExceededError, ErrorCode, ProtocolError
from pydmq.protocol.headers import RequestHeader, encode_response_header, parse_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.api_versions import ApiVersionsResponse
from pydmq.protocol.primitives import Reader, Writer
from pydmq.protocol.scatter import ScatterWriter
from pydmq.quotas.manager import ClientQuotaManager
from pydmq.quotas.throttling import client_throttles

if TYPE_CHECKING:
    from pydmq.security.sasl.authenticator import SaslAuthenticator

__all__ = ["INLINE_DECODE_BUDGET", "RequestDispatcher"]

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_API_VERSIONS = 18
# Elements decoded on the event loop; larger requests are decoded on the decoding thread.
INLINE_DECODE_BUDGET = 10_000

Buffers = Sequence[bytes | bytearray | memoryview]


# Exempt from the request quota, as Kafka: ApiVersions and SASL (a client must always be able
# to learn the versions and authenticate).
_REQUEST_QUOTA_EXEMPT = frozenset((17, 18, 36))
# Kafka's nanosToPercentage: nanoseconds of one thread's time -> percent-seconds.
_NANOS_TO_PERCENT = 100.0 / 1e9


def _decode(
    api_key: int, body: bytearray, body_offset: int, version: int, budget: int
) -> tuple[Any, int]:
    """Decode a request from its private copy (runs on the decoding thread: pure, no state);
    with the nanoseconds it took."""
    started = time.perf_counter_ns()
    request = API_SCHEMAS[api_key].decode_request(Reader(body, body_offset, budget=budget), version)
    return request, time.perf_counter_ns() - started


def _settle(future: asyncio.Future[Buffers | None], buffers: Buffers | None) -> None:
    """Complete a delayed answer, unless its connection closed meanwhile (cancelled)."""
    if not future.done():
        future.set_result(buffers)


class RequestDispatcher(Generic[HostT]):
    """Serves one kind of listener: ``handlers`` by API key, each given a context whose host is
    ``host``; ``unsupported_version`` builds the ApiVersions body answering a version outside
    ApiVersions' range. Owned by the node; called on the event loop by every connection for
    every complete frame. Its decoding thread (started on first use) only runs
    :func:`_decode`."""

    def __init__(
        self,
        host: HostT,
        handlers: Mapping[int, ApiHandlerSpec],
        unsupported_version: Callable[[], ApiVersionsResponse],
        request_quota: ClientQuotaManager | None = None,
        exempt_listeners: frozenset[str] = frozenset(),
    ) -> None:
        self._host = host
        self._request_quota = request_quota
        self._exempt_listeners = exempt_listeners
        self.handlers = dict(handlers)
        self._unsupported_version = unsupported_version
        # Connections already warned about a request over its budget (one line each).
        self._warned: weakref.WeakSet[KafkaConnection] = weakref.WeakSet()
        self._decoder: concurrent.futures.ThreadPoolExecutor | None = None
        # Count and time of every request answered, per API key (read at scrape time).
        self.request_metrics = RequestMetrics()

    def __call__(self, frame: memoryview, connection: KafkaConnection) -> Any:
        gate = connection.authenticator
        if gate is not None and gate.raw_tokens:
            return self._raw_sasl_token(frame, connection, gate)
        started = time.perf_counter()
        queued = started - connection.received_at if connection.received_at else 0.0
        quota = self._request_quota
        charged = quota is not None and quota.enabled
        try:
            header, body_offset = parse_request_header(frame)
        except DecodeBudgetExceededError as exc:
            self._warn_over_budget(connection, f"request header: {exc}", "closing")
            raise CloseConnection(f"request header over its decode budget: {exc}") from None
        except ProtocolError as exc:
            raise CloseConnection(f"unparsable request header: {exc}") from None
        api_key, version = header.api_key, header.api_version
        if gate is not None:
            # A SASL listener: before authentication only ApiVersions and the SASL exchange,
            # after it nothing once the session has expired (see security.sasl.authenticator).
            refusal = gate.refusal(api_key)
            if refusal is not None:
                raise CloseConnection(refusal)
        spec = self.handlers.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == _API_VERSIONS:
                return self._unsupported_api_versions(header.correlation_id)
            raise CloseConnection(f"unsupported version {version} of API key {api_key}")
        budget = decode_budget(api_key)
        inline = min(budget, INLINE_DECODE_BUDGET)
        try:
            request = API_SCHEMAS[api_key].decode_request(
                Reader(frame, body_offset, budget=inline), version
            )
        except DecodeBudgetExceededError as exc:
            if inline - exc.budget + exc.wanted > budget:
                return self._refuse_over_budget(header, connection, exc)
            # Within the API's budget: decode it off the loop. The receive buffer is reused
            # once this returns, so the thread gets a copy (writable: Produce patches it).
            return self._decode_off_loop(header, spec, bytearray(frame), body_offset, connection)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request (key {api_key} v{version}): {exc}") from None
        ctx = self._context(header, connection, len(frame))
        result = spec.handle(ctx, request)
        local_done = time.perf_counter()
        # The request quota's charge: nanoseconds of the handler's time on the loop.
        spent = int((local_done - started) * 1e9) if charged else 0
        if gate is not None:
            connection.principal = gate.principal  # set by a completed SASL exchange
        if inspect.isawaitable(result):
            return self._finish_later(ctx, result, connection, (queued, started, local_done), spent)
        if spent:
            self._charge(ctx, result, spent)
        buffers = self._encode(ctx, result)
        self.request_metrics.record(api_key, queued, time.perf_counter() - started, 0.0)
        if ctx.throttle_time_ms:
            return self._throttled(ctx, connection, buffers)
        return buffers

    @staticmethod
    def _raw_sasl_token(
        frame: memoryview, connection: KafkaConnection, gate: SaslAuthenticator
    ) -> Buffers:
        """A bare SASL token after a SaslHandshake v0: answered with a bare token; a failed
        exchange closes the connection without an answer (v0 has no error field)."""
        outcome = gate.authenticate(bytes(frame))
        if outcome.error_code != ErrorCode.NONE:
            raise CloseConnection(f"SASL authentication failed: {outcome.error_message}")
        connection.principal = gate.principal
        return [_SIZE.pack(len(outcome.auth_bytes)) + outcome.auth_bytes]

    def _context(
        self, header: RequestHeader, connection: KafkaConnection, size: int
    ) -> RequestContext[HostT]:
        return RequestContext(
            broker=self._host,
            api_key=header.api_key,
            api_version=header.api_version,
            correlation_id=header.correlation_id,
            client_id=header.client_id,
            client_host=connection.client_host,
            client_port=connection.client_port,
            listener=connection.listener,
            connection_id=connection.connection_id,
            principal=connection.principal,
            request_size=size,
            authenticator=connection.authenticator,
        )

    async def _decode_off_loop(
        self,
        header: RequestHeader,
        spec: ApiHandlerSpec,
        body: bytearray,
        body_offset: int,
        connection: KafkaConnection,
    ) -> Buffers | None:
        """Decode on the decoding thread, handle on the loop, encode on the decoding thread.

        The response is the handler's own (built for this request), so encoding it off the loop
        (110,000 elements: ~0.1-0.4 s) touches nothing the loop changes meanwhile."""
        api_key, version = header.api_key, header.api_version
        if self._decoder is None:
            self._decoder = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="pydmq-decode"
            )
            # The thread ends with its dispatcher (a broker stopped in a long-lived process).
            weakref.finalize(self, self._decoder.shutdown, wait=False)
        loop = asyncio.get_running_loop()
        try:
            request, spent = await loop.run_in_executor(
                self._decoder, _decode, api_key, body, body_offset, version, decode_budget(api_key)
            )
        except DecodeBudgetExceededError as exc:
            return self._refuse_over_budget(header, connection, exc)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request (key {api_key} v{version}): {exc}") from None
        ctx = self._context(header, connection, len(body))
        quota = self._request_quota
        started = time.perf_counter_ns() if quota is not None and quota.enabled else 0
        result = spec.handle(ctx, request)
        if started:
            spent += time.perf_counter_ns() - started
        if inspect.isawaitable(result):
            result = await result
        if started:
            self._charge(ctx, result, spent)
        buffers = await loop.run_in_executor(self._decoder, self._encode, ctx, result)
        if not ctx.throttle_time_ms:
            return buffers
        throttled = self._throttled(ctx, connection, buffers)
        if isinstance(throttled, asyncio.Future):
            return await throttled
        return throttled

    def _refuse_over_budget(
        self, header: RequestHeader, connection: KafkaConnection, exc: DecodeBudgetExceededError
    ) -> Buffers:
        """INVALID_REQUEST if the response has a top-level error code, else close."""
        api_key, version = header.api_key, header.api_version
        schema = API_SCHEMAS[api_key]
        response = schema.error_response(version, ErrorCode.INVALID_REQUEST)
        what = (
            f"{schema.name} v{version} (client id {header.client_id!r}) over the decode budget "
            f"of {decode_budget(api_key)} elements: {exc}"
        )
        if response is None:
            self._warn_over_budget(connection, what, "closing")
            raise CloseConnection(f"request {what}")
        self._warn_over_budget(connection, what, "answering INVALID_REQUEST")
        writer = Writer(bytearray(_SIZE.size))
        writer.buf += encode_response_header(header.correlation_id, api_key, version)
        schema.encode_response(writer, response, version)
        _SIZE.pack_into(writer.buf, 0, len(writer.buf) - _SIZE.size)
        return [writer.buf]

    def _warn_over_budget(self, connection: KafkaConnection, what: str, action: str) -> None:
        if connection in self._warned:
            return
        self._warned.add(connection)
        log.warning(
            "connection %s from %s:%s: %s; %s (logged once per connection)",
            connection.connection_id,
            connection.client_host,
            connection.client_port,
            what,
            action,
        )

    def _charge(self, ctx: RequestContext[HostT], response: Any, nanos: int) -> None:
        """Kafka's request quota: record ``nanos`` of the client's request time and, over its
        quota, the (bounded) throttle time in the context and the response."""
        quota = self._request_quota
        if (
            quota is None
            or ctx.api_key in _REQUEST_QUOTA_EXEMPT
            or ctx.listener in self._exempt_listeners
        ):
            return
        throttle = quota.record_and_get_throttle_time_ms(
            ctx.principal.name, ctx.client_id or "", nanos * _NANOS_TO_PERCENT
        )
        if not throttle:
            return
        throttle = min(throttle, quota.window_ms)
        ctx.throttle_time_ms = max(ctx.throttle_time_ms, throttle)
        if hasattr(response, "throttle_time"):
            response.throttle_time = max(response.throttle_time, throttle)

    @staticmethod
    def _throttled(
        ctx: RequestContext[HostT], connection: KafkaConnection, buffers: Buffers | None
    ) -> Buffers | asyncio.Future[Buffers | None] | None:
        """``buffers`` with the connection muted for the throttle time, or a future of them
        that completes after it (a client older than KIP-219)."""
        delay = ctx.throttle_time_ms / 1000.0
        if client_throttles(ctx.api_key, ctx.api_version):
            connection.mute_for(delay)
            return buffers
        loop = asyncio.get_running_loop()
        delayed: asyncio.Future[Buffers | None] = loop.create_future()
        loop.call_later(delay, _settle, delayed, buffers)
        return delayed

    def _finish_later(
        self,
        ctx: RequestContext[HostT],
        result: Awaitable[Any],
        connection: KafkaConnection,
        timing: tuple[float, float, float],
        spent: int = 0,
    ) -> asyncio.Future[Buffers | None]:
        """Run the handler's awaitable as the task itself and encode its answer when it ends.

        Wrapping it in a second coroutine left the handler's coroutine unstarted (and warned
        "never awaited") whenever the connection or the broker stopped before the wrapper ran;
        a task owns its coroutine, so cancelling the answer cancels the handler itself.
        """
        task = asyncio.ensure_future(result)
        answer: asyncio.Future[Buffers | None] = task.get_loop().create_future()
        queued, started, local_done = timing

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
                response = done.result()
                if spent:
                    self._charge(ctx, response, spent)
                buffers = self._encode(ctx, response)
            except Exception as encode_error:  # surfaces on the connection, which closes
                answer.set_exception(encode_error)
                return
            self.request_metrics.record(
                ctx.api_key, queued, local_done - started, time.perf_counter() - local_done
            )
            if not ctx.throttle_time_ms:
                answer.set_result(buffers)
                return
            throttled = self._throttled(ctx, connection, buffers)
            if isinstance(throttled, asyncio.Future):
                throttled.add_done_callback(lambda f: _settle(answer, f.result()))
            else:
                answer.set_result(throttled)

        def cancel_handler(settled: asyncio.Future[Buffers | None]) -> None:
            if settled.cancelled():
                task.cancel()

        task.add_done_callback(settle)
        answer.add_done_callback(cancel_handler)
        return answer

    def _encode(self, ctx: RequestContext[HostT], response: Any) -> Buffers | None:
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
        writer = Writer(bytearray(_SIZE.size))
        writer.buf += encode_response_header(correlation_id, _API_VERSIONS, 0)
        API_SCHEMAS[_API_VERSIONS].encode_response(writer, self._unsupported_version(), 0)
        _SIZE.pack_into(writer.buf, 0, len(writer.buf) - _SIZE.size)
        return [writer.buf]
