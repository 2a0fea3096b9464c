"""Requests from this broker to the others over the inter-broker listener: one pipelined
connection per broker, reopened when the broker's endpoint changes (the transaction
coordinator's WriteTxnMarkers, a partition leader's AddPartitionsToTxn verification). Owned by
the event loop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    from pydmq.broker.services import MetadataView
    from pydmq.net.client import NodeConnection
    from pydmq.security.sasl.client import SaslClient

__all__ = ["InterBrokerConnections"]


class InterBrokerConnections:
    """Connections to the other brokers' inter-broker listener, by broker id."""

    def __init__(
        self,
        metadata: Callable[[], MetadataView],
        listener: str,
        client_id: str,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self._metadata = metadata
        self._listener = listener
        self._client_id = client_id
        self._ssl_context = ssl_context  # TLS when the inter-broker listener is SSL
        self._sasl = sasl  # how to authenticate on a SASL inter-broker listener
        self._connections: dict[int, NodeConnection] = {}

    async def request(
        self, broker_id: int, api_key: int, version: int, body: object, timeout: float
    ) -> Any:
        """The broker's answer to one request; raises (ConnectionError, TimeoutError, ...)
        when it cannot be had."""
        endpoint = self._metadata().endpoint(broker_id, self._listener)
        if endpoint is None:
            raise ConnectionError(f"broker {broker_id} has no endpoint on {self._listener}")
        connection = self._connections.get(broker_id)
        if connection is None or (connection.host, connection.port) != endpoint:
            if connection is not None:
                await connection.close()
            from pydmq.net.client import NodeConnection  # cluster mode only (start-up time)

            connection = NodeConnection(
                *endpoint, client_id=self._client_id, ssl_context=self._ssl_context, sasl=self._sasl
            )
            self._connections[broker_id] = connection
        return await connection.request(api_key, version, body, timeout=timeout)

    async def close(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            await connection.close()
