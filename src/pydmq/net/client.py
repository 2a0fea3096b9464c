"""Asynchronous, pipelined client connection for traffic between pydmq nodes.

Raft RPCs, controller-to-broker pushes, broker-to-controller requests and follower fetches
all use :class:`NodeConnection`: one TCP connection to one node, many requests in flight,
responses matched by correlation id. Versions are given by the caller (every node of a
cluster runs pydmq, so there is no ApiVersions negotiation). A broken connection fails
every pending request with :class:`NodeConnectionError`; the next request reconnects.

On a SASL listener the connection authenticates first (SaslHandshake v1, SaslAuthenticate
v2, with the client the ``sasl`` factory makes); when the server gives the session a
lifetime (KIP-368), the connection is replaced by a fresh, re-authenticated one before it
runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from pydmq.protocol.errors import ProtocolError
from pydmq.protocol.framing import SIZE, encode_request_frame, response_size
from pydmq.protocol.headers import parse_response_header, response_correlation_id
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest
from pydmq.security.sasl.client import SaslClient
from pydmq.security.sasl.errors import SaslAuthenticationError

if TYPE_CHECKING:
    import ssl

__all__ = ["NodeConnection", "NodeConnectionError", "NodeUnreachableError"]

_MAX_FRAME: Final = 256 * 1024 * 1024
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
# Reconnect once this share of a SASL session's lifetime has passed.
_REAUTH_SHARE = 0.85


class NodeConnectionError(ConnectionError):
    """The node could not be reached, closed the connection, or did not answer in time."""


class NodeUnreachableError(NodeConnectionError):
    """Connection refused, reset or closed: the node's process is (probably) gone, unlike a
    timeout, which a paused or overloaded node causes too."""


class NodeConnection:
    """One connection to ``host:port``; owned by the event loop that uses it."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        connect_timeout: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        # TLS when the listener dialled is SSL (pydmq.security.tls.node_client_ssl); the
        # handshake counts in the connect timeout.
        self.ssl_context = ssl_context
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[asyncio.Future[Any], int, int]] = {}
        self._correlation_id = 0
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._closed = False
        self._sasl = sasl
        self._session_ends: float | None = None  # monotonic seconds

    def __repr__(self) -> str:
        return f"NodeConnection({self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            if self._closed:
                raise NodeConnectionError(f"connection to {self.host}:{self.port} was closed")
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        self.host,
                        self.port,
                        limit=_MAX_FRAME,
                        ssl=self.ssl_context,
                        server_hostname=None if self.ssl_context is None else self.host,
                    ),
                    self.connect_timeout,
                )
            except TimeoutError as exc:
                raise NodeConnectionError(
                    f"cannot connect to {self.host}:{self.port}: timed out"
                ) from exc
            except OSError as exc:
                raise NodeUnreachableError(
                    f"cannot connect to {self.host}:{self.port}: {exc}"
                ) from exc
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._sasl is not None:
                try:
                    await asyncio.wait_for(
                        self._authenticate(reader, writer, self._sasl()), self.connect_timeout
                    )
                except BaseException:
                    writer.close()
                    raise
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.create_task(self._read_loop(reader))
            return writer

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client: SaslClient
    ) -> None:
        """The SASL exchange, before any other request on the new connection."""

        async def call(api_key: int, version: int, request: Any) -> Any:
            writer.write(encode_request_frame(api_key, version, request, 0, self.client_id))
            try:
                size = response_size(await reader.readexactly(SIZE.size), _MAX_FRAME)
                frame = await reader.readexactly(size)
            except (OSError, asyncio.IncompleteReadError) as exc:
                raise NodeUnreachableError(f"SASL authentication to {self}: {exc}") from exc
            r = parse_response_header(frame, api_key, version)
            return API_SCHEMAS[api_key].decode_response(r, version)

        handshake = await call(_SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=client.mechanism))
        if handshake.error_code:
            raise NodeConnectionError(
                f"{self} refused SASL mechanism {client.mechanism} (error "
                f"{handshake.error_code}; it enables {', '.join(handshake.mechanisms)})"
            )
        message: bytes | None = client.first_message()
        while message is not None:
            answer = await call(_SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=message))
            if answer.error_code:
                raise NodeConnectionError(
                    f"SASL authentication to {self} failed: {answer.error_message}"
                )
            try:
                message = client.evaluate_challenge(answer.auth_bytes)
            except SaslAuthenticationError as exc:
                raise NodeConnectionError(f"SASL authentication to {self}: {exc}") from exc
        lifetime_ms = answer.session_lifetime
        self._session_ends = (
            time.monotonic() + lifetime_ms / 1000 * _REAUTH_SHARE if lifetime_ms > 0 else None
        )

    async def request(
        self, api_key: int, version: int, request: Any, *, timeout: float = 5.0
    ) -> Any:
        """Send ``request`` and return the decoded response; raises NodeConnectionError."""
        schema = API_SCHEMAS[api_key]
        if self._session_ends is not None and time.monotonic() >= self._session_ends:
            self._session_ends = None
            self.reset()  # the SASL session runs out: authenticate a new connection
        writer = await self._connect()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        frame = encode_request_frame(api_key, version, request, correlation_id, self.client_id)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, api_key, version)
        try:
            writer.write(frame)
            return await asyncio.wait_for(future, timeout)
        except TimeoutError as exc:
            # The response may still come; a late one is dropped by the read loop.
            raise NodeConnectionError(
                f"{schema.name} to {self.host}:{self.port} timed out after {timeout}s"
            ) from exc
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        error: BaseException | None = None
        try:
            while True:
                size = response_size(await reader.readexactly(SIZE.size), _MAX_FRAME)
                frame = await reader.readexactly(size)
                entry = self._pending.get(response_correlation_id(frame))
                if entry is None:
                    continue
                future, api_key, version = entry
                r = parse_response_header(frame, api_key, version)
                try:
                    response = API_SCHEMAS[api_key].decode_response(r, version)
                except ProtocolError as exc:
                    if not future.done():
                        future.set_exception(
                            NodeConnectionError(f"undecodable response from {self}: {exc}")
                        )
                    continue
                if not future.done():
                    future.set_result(response)
        except asyncio.CancelledError:
            error = NodeConnectionError(f"connection to {self} closed")
            raise
        except (OSError, asyncio.IncompleteReadError) as exc:
            error = NodeUnreachableError(f"connection to {self} lost: {exc}")
        except ProtocolError as exc:
            error = NodeConnectionError(f"connection to {self} lost: {exc}")
        finally:
            self._drop(error or NodeConnectionError(f"connection to {self} closed"))

    def _drop(self, error: BaseException) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        for future, _, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    def reset(self) -> None:
        """Drop the current connection (pending requests fail); the next request reconnects."""
        task, self._read_task = self._read_task, None
        if task is not None:
            task.cancel()
        self._drop(NodeConnectionError(f"connection to {self} reset"))

    async def close(self) -> None:
        self._closed = True
        task = self._read_task
        self.reset()
        if task is not None:
            with contextlib.suppress(BaseException):
                await task
