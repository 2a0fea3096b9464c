"""Accepting a connection on an SSL listener: TCP first, then the TLS handshake, then Kafka.

:class:`TlsHandshake` is the protocol the listener's server creates per accepted socket. It
stops reading, runs the server side of the TLS handshake over the socket (``loop.start_tls``,
bounded by a timeout), names the client (its certificate's mapped subject DN, or
User:ANONYMOUS without one) and hands the TLS transport to the connection's
:class:`~pydmq.net.connection.KafkaConnection`. A handshake that fails, stalls past its
timeout or yields an unmappable certificate (a plaintext client, garbage, an untrusted CA)
closes that socket and logs one line; nothing else waits on it. Owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pydmq.net.connection import KafkaConnection
from pydmq.security.tls import ServerTls
from pydmq.security.tls_principal import ssl_principal

__all__ = ["TLS_HANDSHAKE_TIMEOUT", "TlsHandshake"]

log = logging.getLogger(__name__)

# Seconds a client has to complete its TLS handshake once connected.
TLS_HANDSHAKE_TIMEOUT = 10.0


class TlsHandshake(asyncio.Protocol):
    """One accepted socket of an SSL listener until its handshake ends (module docstring)."""

    def __init__(
        self,
        tls: ServerTls,
        connection_factory: Callable[[], KafkaConnection],
        *,
        listener: str,
        handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
    ) -> None:
        self._tls = tls
        self._connection_factory = connection_factory
        self._listener = listener
        self._timeout = handshake_timeout
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]  # start_tls takes over from here
        self._task = asyncio.get_running_loop().create_task(self._handshake(transport))

    def connection_lost(self, exc: Exception | None) -> None:
        """The peer left before start_tls took the socket over; the handshake task sees it."""

    async def _handshake(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "?"
        connection = self._connection_factory()
        loop = asyncio.get_running_loop()
        try:
            tls_transport = await loop.start_tls(
                transport,  # type: ignore[arg-type]  # uvloop's transports are not subclasses
                connection,
                self._tls.context,
                server_side=True,
                ssl_handshake_timeout=self._timeout,
            )
            if tls_transport is None:
                raise ConnectionError("connection closed during the handshake")
            ssl_object = tls_transport.get_extra_info("ssl_object")
            connection.principal = ssl_principal(
                ssl_object.getpeercert(binary_form=True), self._tls.principal_mapper
            )
        except (OSError, ValueError, TimeoutError) as exc:
            log.info(
                "closing connection from %s on listener %s: TLS handshake failed: %s",
                where,
                self._listener,
                exc or type(exc).__name__,
            )
            transport.abort()  # type: ignore[attr-defined]
            connection.connection_lost(exc)
            return
        connection.connection_made(tls_transport)
