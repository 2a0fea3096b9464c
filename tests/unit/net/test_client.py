"""NodeConnection against a live in-process broker: pipelining, errors, reconnects."""

from __future__ import annotations

import asyncio

import pytest

from pydmq.net.client import NodeConnection, NodeConnectionError
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest
from pydmq.testing.embedded import EmbeddedBroker


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def test_pipelined_requests_are_matched_by_correlation_id(
    pydmq_broker: EmbeddedBroker,
) -> None:
    host, port = _host_port(pydmq_broker.bootstrap)

    async def run() -> None:
        conn = NodeConnection(host, port, client_id="test")
        try:
            results = await asyncio.gather(
                *(
                    conn.request(3, 12, MetadataRequest(topics=[]))
                    if i % 2
                    else conn.request(
                        18,
                        3,
                        ApiVersionsRequest(
                            client_software_name="pydmq", client_software_version="0.1"
                        ),
                    )
                    for i in range(50)
                )
            )
            assert len(results) == 50
            for i, response in enumerate(results):
                name = type(response).__name__
                assert name == ("MetadataResponse" if i % 2 else "ApiVersionsResponse")
            assert results[1].brokers[0].port == port
        finally:
            await conn.close()

    asyncio.run(run())


def test_unreachable_node_raises_connection_error() -> None:
    async def run() -> None:
        conn = NodeConnection("127.0.0.1", 1, client_id="test", connect_timeout=0.5)
        with pytest.raises(NodeConnectionError):
            await conn.request(
                18,
                3,
                ApiVersionsRequest(client_software_name="pydmq", client_software_version="0.1"),
            )

    asyncio.run(run())


def test_reset_fails_pending_and_reconnects(pydmq_broker: EmbeddedBroker) -> None:
    host, port = _host_port(pydmq_broker.bootstrap)

    async def run() -> None:
        conn = NodeConnection(host, port, client_id="test")
        await conn.request(
            18, 3, ApiVersionsRequest(client_software_name="pydmq", client_software_version="0.1")
        )
        conn.reset()
        assert not conn.connected
        response = await conn.request(
            18, 3, ApiVersionsRequest(client_software_name="pydmq", client_software_version="0.1")
        )
        assert response.error_code == 0
        await conn.close()

    asyncio.run(run())
