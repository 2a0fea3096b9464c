"""One client connection: frames in, ordered responses out. Bytes only; no Kafka semantics.

A reusable receive buffer (``asyncio.BufferedProtocol``) avoids a fresh allocation per request
(page faults dominate on small VMs, DESIGN.md §8). Requests are dispatched as soon as they are
complete; a request whose handler is asynchronous (long-poll Fetch, acks=all) holds back the
requests after it, so responses leave in request order, as Kafka guarantees.

A throttled client is muted (:meth:`KafkaConnection.mute_for`): its requests are neither read
nor served until the throttle time has passed, as Kafka mutes a channel after sending the
response that carries ``throttle_time_ms`` (KIP-219).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias, cast

from pydmq.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from pydmq.net.connection_quotas import Admission
    from pydmq.security.sasl.authenticator import SaslAuthenticator

__all__ = ["CloseConnection", "KafkaConnection", "Outcome"]

log = logging.getLogger(__name__)

Buffers: TypeAlias = Sequence[bytes | bytearray | memoryview]
# A dispatch outcome: buffers to write (size prefix included), None for no response, or an
# awaitable of either.
Outcome: TypeAlias = "Buffers | Awaitable[Buffers | None] | None"


class CloseConnection(Exception):
    """Raised by a dispatcher when Kafka would close the connection (garbage, unknown API)."""


# What a connection reads into once a read starts: bytearray zero-fills, so every byte is
# resident. 256 KiB at accept made 1,000 idle connections pin 250 MiB of RSS; _make_room grows
# (doubling) for the clients that send big frames.
_INITIAL_BUFFER = 16 * 1024
_MAX_PREALLOCATE = 1024 * 1024
# A buffer grown past this for one large frame is dropped once empty: a connection that sent
# a single 100 MiB request would otherwise pin 128 MiB for as long as it stays open. Frames of
# a few MiB (producers' usual sizes) keep their buffer, so they never pay the regrowth.
_SHRINK_ABOVE = 8 * 1024 * 1024
_MAX_BACKLOG_FRAMES = 1000
# Small responses answered while one receive buffer is served are written together (one
# syscall for a pipelining client's window) once the buffer is served or they pass
# _CORK_BYTES; a response of _CORK_ANSWER_BYTES or more (a Fetch's records) leaves at once.
_CORK_BYTES = 256 * 1024
_CORK_ANSWER_BYTES = 16 * 1024
# The buffer of a connection between reads: empty, shared, never written (get_buffer takes a
# buffer of its own before a read).
_NO_BUFFER = bytearray()
_NO_VIEW = memoryview(_NO_BUFFER)
_ids = itertools.count(1)


class KafkaConnection(asyncio.BufferedProtocol):
    """Owned by the event loop; one instance per accepted socket.

    An idle connection holds no receive buffer: one of ``_INITIAL_BUFFER`` bytes is taken
    when a read starts and dropped once every byte read was served (a buffer grown for large
    frames is kept up to ``_SHRINK_ABOVE``, for the producers that send them back to back).
    10,000 idle connections so cost their objects and the kernel's socket, not 16 KiB each."""

    __slots__ = (
        "__weakref__",  # the dispatcher's once-per-connection warnings keep weak references
        "_admit",
        "_authenticate",
        "_backlog",
        "_buf",
        "_cork",
        "_corked_bytes",
        "_dispatch",
        "_end",
        "_max_request_size",
        "_on_close",
        "_pending",
        "_reading_paused",
        "_start",
        "_transport",
        "_unmute",
        "_view",
        "_writing_paused",
        "authenticator",
        "client_host",
        "client_port",
        "closed",
        "connection_id",
        "listener",
        "principal",
        "received_at",
    )

    def __init__(
        self,
        dispatch: Callable[[memoryview, KafkaConnection], Outcome],
        max_request_size: int,
        listener: str,
        on_close: Callable[[KafkaConnection], None] | None = None,
        authenticate: Callable[[asyncio.BaseTransport], KafkaPrincipal] | None = None,
        admit: Callable[[KafkaConnection], Admission | None] | None = None,
    ) -> None:
        self.connection_id = next(_ids)
        self.listener = listener
        self.client_host = ""
        self.client_port = 0
        # Who the client is: replaced by authentication (mTLS, SASL); see pydmq.security.
        self.principal: KafkaPrincipal = ANONYMOUS
        # Names the client from its transport once connected (an mTLS certificate);
        # ValueError closes the connection before any request is read.
        self._authenticate = authenticate
        # A SASL listener's connection: what it may send before and after authenticating
        # (the dispatcher asks it before every request); None on other listeners.
        self.authenticator: SaslAuthenticator | None = None
        self._dispatch = dispatch
        self._max_request_size = max_request_size
        self._on_close = on_close
        # The node's connection quotas: None serves the connection now; an Admission closes
        # it (a refusal) or delays it (see pydmq.net.connection_quotas).
        self._admit = admit
        self._buf = _NO_BUFFER
        self._view = _NO_VIEW
        # While frames of one read are served: their responses, written at its end.
        self._cork: list[bytes | bytearray | memoryview] | None = None
        self._corked_bytes = 0
        self._start = 0
        self._end = 0
        self._transport: asyncio.Transport | None = None
        self._pending: asyncio.Future[Buffers | None] | None = None
        self._backlog: deque[tuple[float, bytearray]] = deque()
        # When the frame being dispatched arrived, if it waited in the backlog (its queue time
        # in the dispatcher's request metrics); 0.0 for a frame dispatched as it arrived.
        self.received_at = 0.0
        self._reading_paused = False
        self._writing_paused = False
        # Set while the client is muted for its throttle time (mute_for).
        self._unmute: asyncio.TimerHandle | None = None
        self.closed = False

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client_host, self.client_port = str(peer[0]), int(peer[1])
        verdict = None if self._admit is None else self._admit(self)
        if verdict is not None and verdict.refusal is not None:
            log.debug(
                "closing connection %s from %s:%s on listener %s: %s",
                self.connection_id,
                self.client_host,
                self.client_port,
                self.listener,
                verdict.refusal,
            )
            if verdict.delay_ms > 0:  # held like a muted client: nothing is served meanwhile
                self._unmute = asyncio.get_running_loop().call_later(
                    verdict.delay_ms / 1000, self.close
                )
                self._pause_reading()
            else:
                self.close()
            return
        if verdict is not None:
            self.mute_for(verdict.delay_ms / 1000)  # its turn under the creation rate
        if self._authenticate is not None:
            try:
                self.principal = self._authenticate(transport)
            except ValueError as exc:
                log.info(
                    "closing connection %s from %s:%s on listener %s: %s",
                    self.connection_id,
                    self.client_host,
                    self.client_port,
                    self.listener,
                    exc,
                )
                self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.closed and self._transport is None:
            return  # already reported (a TLS handshake that failed)
        self.closed = True
        if self._pending is not None:
            self._pending.cancel()
        if self._unmute is not None:
            self._unmute.cancel()
        self._backlog.clear()
        if self._on_close is not None:
            self._on_close(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._end == len(self._buf):
            self._make_room(_INITIAL_BUFFER)
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        if self._reading_paused and self._transport is not None:
            # uvloop starts reading after connection_made() even when it paused reading
            # (a delayed or refused connection): pause again, so it holds what it has.
            self._transport.pause_reading()
        self._process_frames()

    def eof_received(self) -> bool | None:
        return False

    def pause_writing(self) -> None:
        # The client does not read its responses: stop reading its requests (bounded memory).
        self._writing_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._serve_held()

    # -- framing -----------------------------------------------------------------------
    def _make_room(self, needed: int) -> None:
        """Ensure ``needed`` free bytes after ``_end``: compact first, grow only if required."""
        used = self._end - self._start
        if self._start > 0 and len(self._buf) - used >= needed:
            self._buf[0:used] = self._buf[self._start : self._end]
            self._start, self._end = 0, used
            return
        if len(self._buf) - self._end >= needed:
            return
        grown = bytearray(max(len(self._buf) * 2, used + needed))
        grown[0:used] = self._buf[self._start : self._end]
        self._buf, self._view = grown, memoryview(grown)
        self._start, self._end = 0, used

    def _process_frames(self) -> None:
        if self._cork is not None:  # re-entered (e.g. from _serve_held): the outer call flushes
            self._serve_frames()
            return
        self._cork = []
        try:
            self._serve_frames()
        finally:
            self._flush_cork()
            self._cork = None

    def _serve_frames(self) -> None:
        buf = self._buf
        # Once the client stops reading its responses, frames already received stay in the
        # buffer until it catches up: handling them would queue a response each (8 MiB
        # Fetch answers from a buffer of small requests pinned over 1 GB).
        while not self.closed and not self._writing_paused and self._unmute is None:
            available = self._end - self._start
            if available < 4:
                break
            size = int.from_bytes(buf[self._start : self._start + 4], "big", signed=True)
            limit = self._max_request_size
            auth = self.authenticator
            if auth is not None and not auth.authenticated_once:
                limit = min(limit, auth.max_receive_size)  # sasl.server.max.receive.size
            if size < 0 or size > limit:
                log.info(
                    "closing connection %s from %s:%s: request size %d outside [0, %d]",
                    self.connection_id,
                    self.client_host,
                    self.client_port,
                    size,
                    limit,
                )
                self.close()
                return
            if available < 4 + size:
                if 4 + size > len(buf) - self._start:
                    # Reserve at most _MAX_PREALLOCATE ahead of the bytes actually received:
                    # bytearray() zero-fills (touches every page), so trusting the announced
                    # size would let a client pin 100 MiB of RSS per 4 bytes it sends. Larger
                    # frames grow the buffer (doubling) as their bytes arrive.
                    self._make_room(min(4 + size - available, _MAX_PREALLOCATE))
                    buf = self._buf
                break
            frame_start = self._start + 4
            self._start = frame_start + size
            frame = self._view[frame_start : frame_start + size]
            if self._pending is not None or self._backlog:
                # writable: offsets are patched in place
                self._backlog.append((time.perf_counter(), bytearray(frame)))
                if len(self._backlog) >= _MAX_BACKLOG_FRAMES:
                    self._pause_reading()
            else:
                self._handle(frame)
        if self._start == self._end:
            self._start = self._end = 0
            if len(self._buf) <= _INITIAL_BUFFER or len(self._buf) > _SHRINK_ABOVE:
                # Served every byte: an idle connection pins no buffer (the next read takes a
                # fresh one). Views of the old buffer held by requests in flight keep it alive.
                self._buf, self._view = _NO_BUFFER, _NO_VIEW

    def _handle(self, frame: memoryview) -> None:
        try:
            outcome = self._dispatch(frame, self)
        except CloseConnection as exc:
            log.info("closing connection %s: %s", self.connection_id, exc)
            self.close()
            return
        except Exception:
            log.exception("unexpected error serving connection %s", self.connection_id)
            self.close()
            return
        if outcome is None or isinstance(outcome, list | tuple):
            self._write(outcome)
            return
        self._pending = asyncio.ensure_future(cast("Awaitable[Buffers | None]", outcome))
        self._pending.add_done_callback(self._pending_done)

    def _pending_done(self, future: asyncio.Future[Buffers | None]) -> None:
        self._pending = None
        if self.closed or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            if not isinstance(exc, CloseConnection):
                log.error("handler failed on connection %s", self.connection_id, exc_info=exc)
            self.close()
            return
        self._write(future.result())
        self._serve_held()

    def _serve_held(self) -> None:
        """Serve the requests held back (behind an asynchronous one, or while the client did
        not read), then read again, unless one of them is asynchronous or writing paused."""
        while self._backlog and self._pending is None and not self.closed:
            if self._writing_paused or self._unmute is not None:
                return
            self.received_at, held = self._backlog.popleft()
            self._handle(memoryview(held))
            self.received_at = 0.0
        if (
            self._pending is None
            and not self._writing_paused
            and self._unmute is None
            and not self.closed
        ):
            self._resume_reading()
            # frames may already sit in the receive buffer
            self._process_frames()

    def mute_for(self, seconds: float) -> None:
        """Neither read nor serve this client's requests for ``seconds`` (a throttle time),
        from now: called as its throttled response is handed over, so that response still
        leaves. A longer mute replaces a shorter one."""
        if self.closed or seconds <= 0:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + seconds
        if self._unmute is not None:
            if self._unmute.when() >= until:
                return
            self._unmute.cancel()
        self._unmute = loop.call_at(until, self._unmuted)
        self._pause_reading()

    def _unmuted(self) -> None:
        self._unmute = None
        self._serve_held()

    def _flush_cork(self) -> None:
        cork = self._cork
        if not cork:
            return
        self._cork = []
        self._corked_bytes = 0
        if self._transport is not None and not self.closed:
            self._transport.writelines(cork)

    def _write(self, buffers: Buffers | None) -> None:
        if buffers is None or self._transport is None or self.closed:
            return
        cork = self._cork
        if cork is not None and self.authenticator is None:
            size = sum(len(b) for b in buffers)
            if size < _CORK_ANSWER_BYTES:
                cork.extend(buffers)
                self._corked_bytes += size
                if self._corked_bytes >= _CORK_BYTES:
                    self._flush_cork()
                return
        self._flush_cork()
        if len(buffers) == 1:
            self._transport.write(buffers[0])
        else:
            self._transport.writelines(buffers)
        if self.authenticator is not None and self.authenticator.failed:
            # Kafka closes a connection whose SASL exchange failed once it has its answer,
            # after connection.failed.authentication.delay.ms without reading it (a client
            # that retries at once is slowed down, not the others).
            self._pause_reading()
            delay = self.authenticator.failure_delay_ms
            if delay > 0:
                asyncio.get_running_loop().call_later(delay / 1000, self.close)
            else:
                self.close()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None:
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and not self.closed:
            self._reading_paused = False
            self._transport.resume_reading()

    def close(self) -> None:
        if not self.closed and self._transport is not None:
            self._flush_cork()  # answers before the closing frame still leave
            self.closed = True
            self._transport.close()
