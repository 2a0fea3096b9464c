"""Where the transaction coordinator's markers go (the ports of
:mod:`pydmq.transactions.markers`, as this broker implements them).

:class:`RegistryPartitionLeaders` answers where a partition is led from the broker's topic
registry (a single node's own, a cluster's metadata cache). :class:`WriteTxnMarkersDelivery`
delivers a WriteTxnMarkers request (api key 27): to this broker itself in process, through the
handler its client listeners serve for key 27 (the same handler, request object and version
the network would carry, with the in-process listener name ``""``; a :class:`ConnectionError`
while none is served), and in cluster mode to another broker over the inter-broker listener,
one pipelined connection per broker, as Kafka's TransactionMarkerChannelManager does. Owned by
the event loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.inter_broker import InterBrokerConnections
from pydmq.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.storage.api import TopicPartition
from pydmq.transactions.markers import NO_LEADER

if TYPE_CHECKING:
    import ssl

    from pydmq.broker.services import BrokerServices, MetadataView
    from pydmq.broker.topics import TopicRegistry
    from pydmq.security.sasl.client import SaslClient

__all__ = ["IN_PROCESS_LISTENER", "RegistryPartitionLeaders", "WriteTxnMarkersDelivery"]

WRITE_TXN_MARKERS = 27
IN_PROCESS_LISTENER = ""
"""The listener name of a request dispatched in process: it came over no connection (the
WriteTxnMarkers handler accepts markers only from it or the inter-broker listener)."""
_CLIENT_ID = "transaction-coordinator"
_REQUEST_TIMEOUT_S = 30.0


class RegistryPartitionLeaders:
    """Partition leaders as the broker's topic registry has them."""

    def __init__(self, topics: TopicRegistry) -> None:
        self._topics = topics

    def leader_of(self, tp: TopicPartition) -> int | None:
        topic = self._topics.get(tp.topic)
        if topic is None:
            return None
        partitions = topic.partitions
        index = tp.partition
        # partitions are listed by index; searched only if that ever does not hold
        leader: int | None
        if 0 <= index < len(partitions) and partitions[index].index == index:
            leader = partitions[index].leader
        else:
            leader = next((p.leader for p in partitions if p.index == index), None)
            if leader is None:
                return None
        return leader if leader >= 0 else NO_LEADER


class WriteTxnMarkersDelivery:
    """WriteTxnMarkers to a broker: in process to this one, over the network to the others."""

    def __init__(
        self,
        node_id: int,
        services: Callable[[], BrokerServices],
        metadata: Callable[[], MetadataView],
        inter_broker_listener: str,
        ssl_context: ssl.SSLContext | None = None,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self._node_id = node_id
        self._services = services
        self._brokers = InterBrokerConnections(
            metadata, inter_broker_listener, _CLIENT_ID, ssl_context, sasl
        )

    async def send(
        self, broker_id: int, version: int, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        if broker_id == self._node_id:
            return await self._in_process(version, request)
        response: WriteTxnMarkersResponse = await self._brokers.request(
            broker_id, WRITE_TXN_MARKERS, version, request, _REQUEST_TIMEOUT_S
        )
        return response

    async def _in_process(
        self, version: int, request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        services = self._services()
        handlers: Mapping[int, ApiHandlerSpec] = services.served_apis(None)
        spec = handlers.get(WRITE_TXN_MARKERS)
        if spec is None or not spec.min_version <= version <= spec.max_version:
            raise ConnectionError(f"WriteTxnMarkers v{version} is not served here")
        ctx: RequestContext[BrokerServices] = RequestContext(
            broker=services,
            api_key=WRITE_TXN_MARKERS,
            api_version=version,
            correlation_id=0,
            client_id=_CLIENT_ID,
            client_host="",
            client_port=0,
            listener=IN_PROCESS_LISTENER,
            connection_id=-1,
        )
        answer = spec.handle(ctx, request)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, WriteTxnMarkersResponse):
            raise ConnectionError(f"WriteTxnMarkers answered {type(answer).__name__}")
        return answer

    async def close(self) -> None:
        await self._brokers.close()
