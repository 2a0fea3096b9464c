"""Fuzzing the TLS handshake path of an SSL listener (a live node in process).

Inputs sent on a fresh TCP connection to the TLS port: random bytes, mutated and truncated
real ClientHellos, and plaintext Kafka request frames. Each connection must be closed by the
node (EOF, after at most a TLS alert), within the handshake timeout plus a wedge bound; no
Kafka response may come back; nothing may be logged at ERROR; and a well-behaved TLS client
is answered right after every input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_harness import fuzz_settings, valid_request_frame
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_decoders import mutated

from pydmq.config.broker import BrokerConfig
from pydmq.config.listener_security import ssl_settings
from pydmq.net.client import NodeConnection
from pydmq.node import Node
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.security.tls import client_ssl_context
from pydmq.testing.tls import TestCA

pytestmark = pytest.mark.timeout(300)

HANDSHAKE_TIMEOUT = 0.2  # truncated handshakes wait it out: kept short for the example count


def client_hello() -> bytes:
    """The first flight of a real TLS client (a ClientHello record)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    session = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):
        session.do_handshake()
    return outgoing.read()


HELLO = client_hello()
KAFKA_FRAME = (lambda f: struct.pack(">i", len(f)) + f)(valid_request_frame(18, 3))


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def tls_node(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Node, asyncio.AbstractEventLoop, ssl.SSLContext]]:
    root: Path = tmp_path_factory.mktemp("fuzz-tls")
    ca = TestCA(root / "certs")
    server = ca.issue("server")
    config = BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "pydmq.http.listeners": "http://127.0.0.1:0",
            "log.dirs": str(root / "data"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.pem),
        }
    )
    client = client_ssl_context(
        ssl_settings(
            BrokerConfig({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.pem)}),
            "SSL",
        ),
        "SSL",
    )
    loop = asyncio.new_event_loop()
    node = Node(config)
    node.tls_handshake_timeout = HANDSHAKE_TIMEOUT
    loop.run_until_complete(node.start())
    try:
        yield node, loop, client
    finally:
        loop.run_until_complete(node.stop())
        loop.close()


async def probe(port: int, data: bytes) -> bytes:
    """Send ``data`` and read until the node closes the connection; what it sent back."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), HANDSHAKE_TIMEOUT + 10)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


async def good_client(port: int, context: ssl.SSLContext) -> None:
    connection = NodeConnection("127.0.0.1", port, client_id="good", ssl_context=context)
    try:
        request = ApiVersionsRequest(client_software_name="good", client_software_version="1")
        response = await connection.request(18, 3, request, timeout=10)
        assert response.error_code == 0
    finally:
        await connection.close()


inputs = st.one_of(
    st.binary(max_size=2048),
    mutated(HELLO),
    st.integers(0, len(HELLO) - 1).map(lambda n: HELLO[:n]),
    mutated(KAFKA_FRAME),
    st.just(KAFKA_FRAME),
)


@fuzz_settings(80)
@given(data=inputs)
def test_bad_handshakes_close_cleanly_and_others_are_served(
    tls_node: tuple[Node, asyncio.AbstractEventLoop, ssl.SSLContext], data: bytes
) -> None:
    node, loop, context = tls_node
    port = node.bound_ports["SSL"]
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:

        async def run() -> Any:
            answer = await probe(port, data)
            await good_client(port, context)
            return answer

        answer = loop.run_until_complete(run())
    finally:
        logging.getLogger().removeHandler(errors)
    # At most a TLS alert record (content type 21), never a Kafka response frame.
    assert answer == b"" or answer[0] in (0x15, 0x16), answer[:16]
    assert not errors.records, [r.getMessage() for r in errors.records]
