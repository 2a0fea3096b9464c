"""BrokerCalls: the Kafka requests the REST admin API sends, run by this broker's handlers.

A REST request becomes the Kafka request a Kafka AdminClient would send for it, handed to the
handler this broker's client listeners use, with a request context naming the REST client
(its address, and its principal: the HTTP Basic user, else ``User:ANONYMOUS`` as on a
PLAINTEXT listener). So validation, authorization, forwarding to the controller (cluster mode:
the handler sends the request on, as it does a client's) and the coordinators' rules are
those of the Kafka path. A request that must be answered by another broker (the coordinator of
a group, the leader of a partition) goes to it over the inter-broker listener, as the broker's
own requests to its peers do, once :meth:`BrokerCalls.authorized` allowed what the Kafka
handler would have checked.
"""

from __future__ import annotations

import inspect
import itertools
from typing import TYPE_CHECKING, Any

from pydmq.api.handler import RawResponse, RequestContext
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader
from pydmq.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

if TYPE_CHECKING:
    from pydmq.broker.inter_broker import InterBrokerConnections
    from pydmq.broker.server import Broker
    from pydmq.broker.services import BrokerServices
    from pydmq.http.messages import HttpRequest

__all__ = ["BrokerCalls"]

CLIENT_ID = "pydmq-rest"
_PEER_TIMEOUT_S = 30.0


class BrokerCalls:
    """Runs Kafka requests for the REST handlers. Owned by the node's HTTP service, used on
    its event loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        config = broker.config
        controllers = set(config.controller_listener_names)
        names = [uri.partition("://")[0].strip() for uri in config.listeners]
        self.listener = next(
            (n for n in names if n not in controllers and n != broker.control_plane_listener),
            names[0],
        )
        self._correlation = itertools.count(1)
        self._peers: InterBrokerConnections | None = None

    @property
    def services(self) -> BrokerServices:
        return self.broker.services

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def _context(self, http: HttpRequest, api_key: int, version: int) -> RequestContext[Any]:
        principal = ANONYMOUS if http.user is None else KafkaPrincipal(USER_TYPE, http.user)
        return RequestContext(
            broker=self.broker.services,
            api_key=api_key,
            api_version=version,
            correlation_id=next(self._correlation),
            client_id=CLIENT_ID,
            client_host=http.client_host,
            client_port=http.client_port,
            listener=self.listener,
            connection_id=-1,
            principal=principal,
        )

    async def call(self, http: HttpRequest, api_key: int, version: int, request: Any) -> Any:
        """This broker's answer to ``request`` (API ``api_key`` at ``version``), as its client
        listeners would give it."""
        spec = self.broker.dispatcher.handlers[api_key]
        assert spec.min_version <= version <= spec.max_version, (api_key, version)
        result = spec.handle(self._context(http, api_key, version), request)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, RawResponse):  # an answer the handler encoded (Metadata's)
            body = b"".join(bytes(part) for part in result.buffers)
            return API_SCHEMAS[api_key].decode_response(Reader(body), version)
        return result

    def authorized(
        self, http: HttpRequest, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """Whether the REST client may do ``operation`` on the resource: checked here, as the
        Kafka handler would, before a request goes on as this broker's own (over the
        inter-broker listener, or to the controller)."""
        from pydmq.broker.handlers._authorize import authorized

        return authorized(self._context(http, 0, 0), operation, resource_type, name)

    async def call_at(
        self, broker_id: int, http: HttpRequest, api_key: int, version: int, request: Any
    ) -> Any:
        """Broker ``broker_id``'s answer: this broker's handler, or the other broker's over the
        inter-broker listener (cluster mode). Raises ConnectionError/TimeoutError when it
        cannot be had."""
        if broker_id == self.node_id or self.broker.cluster is None:
            return await self.call(http, api_key, version, request)
        if self._peers is None:
            from pydmq.broker.inter_broker import InterBrokerConnections

            cluster = self.broker.cluster
            self._peers = InterBrokerConnections(
                lambda: self.broker.services.metadata,
                self.broker.config.inter_broker_listener_name,
                CLIENT_ID,
                cluster.inter_broker_ssl,
                self.broker.inter_broker_sasl,
            )
        return await self._peers.request(broker_id, api_key, version, request, _PEER_TIMEOUT_S)

    async def close(self) -> None:
        if self._peers is not None:
            await self._peers.close()
