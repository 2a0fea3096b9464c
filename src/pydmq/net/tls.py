"""An SSL listener: accept, run the server side of the TLS handshake, then serve Kafka.

:class:`TlsListener` owns one listening socket. Its accept loop hands each socket to
``loop.connect_accepted_socket`` with the listener's SSL context and a handshake timeout, in a
task of its own, so a slow or hostile handshake never holds up the next accept. A handshake
that fails or stalls past its timeout (a plaintext client, garbage, an untrusted certificate)
closes that socket and logs one line. Once the handshake is done, the connection's
:class:`~pydmq.net.connection.KafkaConnection` names its client from the TLS session (the
``authenticate`` hook :func:`tls_principal` builds) before it reads a request.

(``loop.start_tls`` over an accepted plain connection cannot be used: uvloop delivers the
first bytes, the ClientHello, before the protocol can pause reading, and they would be lost.)
Owned by the event loop; it mirrors the part of ``asyncio.Server`` the node uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from pydmq.net.connection import KafkaConnection
from pydmq.security.principal import KafkaPrincipal
from pydmq.security.tls import ServerTls
from pydmq.security.tls_principal import ssl_principal

__all__ = ["MAX_PENDING_HANDSHAKES", "TLS_HANDSHAKE_TIMEOUT", "TlsListener", "tls_principal"]

log = logging.getLogger(__name__)

# Seconds a client has to complete its TLS handshake once connected.
TLS_HANDSHAKE_TIMEOUT = 10.0
# Handshakes one listener runs at once: each holds a descriptor until it ends or times out,
# before the connection quotas can count it; a socket accepted beyond them is closed at once.
MAX_PENDING_HANDSHAKES = 256


def tls_principal(tls: ServerTls) -> Callable[[asyncio.BaseTransport], KafkaPrincipal]:
    """The principal of a TLS connection: its client certificate's mapped subject DN, or
    User:ANONYMOUS without a certificate; ValueError when no mapping rule applies."""

    def authenticate(transport: asyncio.BaseTransport) -> KafkaPrincipal:
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is None:
            raise ValueError("no TLS session")
        return ssl_principal(ssl_object.getpeercert(binary_form=True), tls.principal_mapper)

    return authenticate


class TlsListener:
    """One SSL listener's socket and accept loop (see the module docstring)."""

    def __init__(
        self,
        name: str,
        sock: socket.socket,
        tls: ServerTls,
        connection_factory: Callable[[], KafkaConnection],
        handshake_timeout: float = TLS_HANDSHAKE_TIMEOUT,
    ) -> None:
        self.name = name
        self.sockets = [sock]
        self._tls = tls
        self._connection_factory = connection_factory
        self.handshake_timeout = handshake_timeout
        self._accepting: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Task[None]] = set()
        self.refused_handshakes = 0  # sockets closed because MAX_PENDING_HANDSHAKES were running

    @classmethod
    def bind(
        cls,
        name: str,
        host: str | None,
        port: int,
        tls: ServerTls,
        connection_factory: Callable[[], KafkaConnection],
    ) -> TlsListener:
        """Bind ``host:port`` (every interface for None) without listening yet: until
        :meth:`start_serving`, a connection is refused, as asyncio's unstarted servers do."""
        dual = not host and socket.has_dualstack_ipv6()
        family = socket.AF_INET6 if dual or (host and ":" in host) else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if dual:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((host or "", port))
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        return cls(name, sock, tls, connection_factory)

    def is_serving(self) -> bool:
        return self._accepting is not None and not self._accepting.done()

    async def start_serving(self) -> None:
        if self._accepting is None:
            self.sockets[0].listen(1024)
            self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
        for task in self._handshakes:
            task.cancel()
        self.sockets[0].close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._accepting, *self._handshakes) if t is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        listening = self.sockets[0]
        while True:
            try:
                sock, peer = await loop.sock_accept(listening)
            except OSError as exc:  # EMFILE and the like: back off, keep listening
                log.warning("listener %s: accept failed: %s", self.name, exc)
                await asyncio.sleep(0.1)
                continue
            if len(self._handshakes) >= MAX_PENDING_HANDSHAKES:
                self.refused_handshakes += 1
                sock.close()
                continue
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._handshake(sock, peer))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, sock: socket.socket, peer: object) -> None:
        connection = self._connection_factory()
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: connection,
                sock,
                ssl=self._tls.context,
                ssl_handshake_timeout=self.handshake_timeout,
            )
        except (OSError, TimeoutError) as exc:
            where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
            log.info(
                "closing connection from %s on listener %s: TLS handshake failed: %s",
                where,
                self.name,
                str(exc) or type(exc).__name__,
            )
            self._drop(sock, connection, exc)
        except asyncio.CancelledError:  # the listener closes
            self._drop(sock, connection, None)
            raise
        except Exception as exc:  # a bug: still only this connection pays for it
            log.exception("TLS handshake on listener %s failed unexpectedly", self.name)
            self._drop(sock, connection, exc)

    @staticmethod
    def _drop(sock: socket.socket, connection: KafkaConnection, exc: Exception | None) -> None:
        with contextlib.suppress(OSError):
            sock.close()
        connection.connection_lost(exc)
