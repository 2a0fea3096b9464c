"""Requests to an in-process broker's handlers as a chosen principal.

Until the node authenticates connections (TLS, SASL), every connection is User:ANONYMOUS; a
test that needs another principal (an admin in ``super.users``, alice, bob) calls the
broker's own handler for the API key with a :class:`~pydmq.api.handler.RequestContext`
carrying that principal, on the broker's event loop: the request takes the path a request
from that principal's connection takes after decoding.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydmq.api.handler import RawResponse, RequestContext
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.primitives import Reader
from pydmq.security.principal import KafkaPrincipal
from pydmq.testing import EmbeddedBroker

__all__ = ["call_as"]


def call_as(
    embedded: EmbeddedBroker,
    principal: str,
    api_key: int,
    version: int,
    request: Any,
    *,
    host: str = "127.0.0.1",
    listener: str = "PLAINTEXT",
) -> Any:
    """The response of ``embedded``'s handler for ``api_key`` to ``request`` from
    ``principal`` (``User:alice``) connected from ``host``, decoded when the handler
    answered with encoded bytes (a ``RawResponse``)."""
    broker: Any = embedded.broker
    services = broker.services
    spec = services.served_apis(None)[api_key]
    who = KafkaPrincipal.parse(principal)

    async def run() -> Any:
        ctx = RequestContext(
            services, api_key, version, 1, "acl-test", host, 1, listener, 1, principal=who
        )
        answer = spec.handle(ctx, request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, RawResponse):  # an answer the handler encoded itself
            body = b"".join(bytes(part) for part in answer.buffers)
            return API_SCHEMAS[api_key].decode_response(Reader(body), version)
        return answer

    return embedded.run_on_loop(run)
