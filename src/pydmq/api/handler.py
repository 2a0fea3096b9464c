"""What a request handler is: its API key, version range and the callable that serves it.

Handlers are registered through ``pydmq_register_api_handlers``; the ApiVersions response is
derived from these registrations, so nothing is advertised that has no handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydmq.security.principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from pydmq.security.sasl.authenticator import SaslAuthenticator

__all__ = ["ApiHandlerSpec", "Handler", "HandlerResult", "HostT", "RawResponse", "RequestContext"]

HostT = TypeVar("HostT")


@dataclass(slots=True)
class RequestContext(Generic[HostT]):
    """Who sent a request and how: one per request, built by the dispatcher on the event loop.

    ``broker`` is the node object the dispatcher serves (Kafka calls every node a broker): a
    type parameter, so that this layer names no role. The broker's handlers take a
    ``BrokerContext`` (:mod:`pydmq.broker.context`) and see a ``Broker`` there; the
    controller's handlers take ``RequestContext[object]`` and do not use it.
    """

    broker: HostT
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int
    listener: str
    connection_id: int
    # The connection's principal when the request arrived (User:ANONYMOUS until it
    # authenticates); what the authorizer checks.
    principal: KafkaPrincipal = ANONYMOUS
    # The request's size in bytes (header and body), which the produce quota records.
    request_size: int = 0
    # Set by a handler whose client exceeded a quota: the dispatcher mutes the connection
    # for this long after the response (or delays the response of a client older than
    # KIP-219), see pydmq.quotas.throttling.
    throttle_time_ms: int = 0
    # The connection's SASL state on a SASL listener (the SaslHandshake and SaslAuthenticate
    # handlers drive it), None elsewhere.
    authenticator: SaslAuthenticator | None = None


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A response body already encoded as buffers (hot paths like Fetch skip the codec).

    ``buffers`` exclude the response header and size prefix; the driver adds them.
    """

    buffers: Sequence[bytes | bytearray | memoryview]
    size: int


HandlerResult = Any  # a generated response message, a RawResponse, or None (acks=0: no reply)
Handler = Callable[[RequestContext[Any], Any], "HandlerResult | Awaitable[HandlerResult]"]


@dataclass(frozen=True, slots=True)
class ApiHandlerSpec:
    """One API key's handler and the version range it serves (and therefore advertises).

    ``advertised_min`` (when set, below ``min_version``) is what ApiVersions advertises
    instead: Kafka 4 advertises Produce from v0 but closes the connection on v0-v2 requests
    (KAFKA-18659), because older librdkafka derives "the broker supports compression" from
    the advertised minimum and silently stops compressing otherwise.
    """

    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    name: str = ""
    advertised_min: int | None = None
