"""An SSL listener of a real node, in process: the handshake, the client's principal, and
what a failed or stalled handshake does (one log line, that socket closed, nobody else
waits). The node's own client (NodeConnection) is the TLS client here."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.config.listener_security import ssl_settings
from pydmq.net import tls as tls_module
from pydmq.net.client import NodeConnection, NodeConnectionError
from pydmq.node import Node
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.security.principal import ANONYMOUS, KafkaPrincipal
from pydmq.security.tls import client_ssl_context
from pydmq.testing.tls import Identity, TestCA

pytestmark = pytest.mark.timeout(60)

API_VERSIONS = 18
# uvloop (what `pydmq serve` runs on) and asyncio's own loop.
LOOPS = ["asyncio", "uvloop"]


def run_on(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(main())
    else:
        asyncio.run(main())


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def identities(ca: TestCA) -> dict[str, Identity]:
    return {name: ca.issue(name) for name in ("server", "client")}


def node_config(tmp_path: Path, ca: TestCA, server: Identity, **extra: str) -> BrokerConfig:
    return BrokerConfig(
        {
            "listeners": "SSL://127.0.0.1:0",
            "pydmq.http.listeners": "http://127.0.0.1:0",
            "log.dirs": str(tmp_path / "data"),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem),
            **extra,
        }
    )


def client_context(ca: TestCA, identity: Identity | None) -> ssl.SSLContext:
    values: dict[str, object] = {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.pem),
    }
    if identity is not None:
        values |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(identity.pem)}
    return client_ssl_context(ssl_settings(BrokerConfig(values), "SSL"), "SSL")


@asynccontextmanager
async def running(config: BrokerConfig, timeout: float = 10.0) -> AsyncIterator[Node]:
    node = Node(config)
    node.tls_handshake_timeout = timeout
    await asyncio.wait_for(node.start(), 30)
    try:
        yield node
    finally:
        await asyncio.wait_for(node.stop(), 30)


async def api_versions(port: int, context: ssl.SSLContext) -> NodeConnection:
    connection = NodeConnection("127.0.0.1", port, client_id="t", ssl_context=context)
    response = await connection.request(
        API_VERSIONS,
        3,
        ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        timeout=10,
    )
    assert response.error_code == 0 and response.api_keys
    return connection


async def principals(node: Node, wanted: Callable[[KafkaPrincipal], bool]) -> KafkaPrincipal:
    for _ in range(100):
        found = [c.principal for c in node.connections if wanted(c.principal)]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError([c.principal for c in node.connections])


@pytest.mark.parametrize("loop", LOOPS)
def test_mtls_required_names_the_client_by_its_mapped_dn(
    tmp_path: Path,
    ca: TestCA,
    identities: dict[str, Identity],
    caplog: pytest.LogCaptureFixture,
    loop: str,
) -> None:
    config = node_config(
        tmp_path,
        ca,
        identities["server"],
        **{
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+)$/svc-$1/U,DEFAULT",
        },
    )

    async def run() -> None:
        async with running(config) as node:
            port = node.bound_ports["SSL"]
            connection = await api_versions(port, client_context(ca, identities["client"]))
            assert await principals(node, lambda p: p != ANONYMOUS) == KafkaPrincipal(
                "User", "SVC-CLIENT"
            )
            await connection.close()
            with caplog.at_level(logging.INFO, logger="pydmq.net.tls"):
                with pytest.raises(NodeConnectionError):
                    await api_versions(port, client_context(ca, None))
                for _ in range(100):
                    if "TLS handshake failed" in caplog.text:
                        break
                    await asyncio.sleep(0.02)
            failures = [r for r in caplog.records if "TLS handshake failed" in r.getMessage()]
            assert len(failures) == 1, caplog.text

    run_on(loop, run)


def test_without_client_auth_a_client_is_anonymous(
    tmp_path: Path, ca: TestCA, identities: dict[str, Identity]
) -> None:
    config = node_config(tmp_path, ca, identities["server"])

    async def run() -> None:
        async with running(config) as node:
            port = node.bound_ports["SSL"]
            connection = await api_versions(port, client_context(ca, None))
            assert [c.principal for c in node.connections] == [ANONYMOUS]
            await connection.close()

    asyncio.run(run())


def test_requested_client_auth_names_a_client_that_has_a_certificate(
    tmp_path: Path, ca: TestCA, identities: dict[str, Identity]
) -> None:
    config = node_config(tmp_path, ca, identities["server"], **{"ssl.client.auth": "requested"})

    async def run() -> None:
        async with running(config) as node:
            port = node.bound_ports["SSL"]
            anonymous = await api_versions(port, client_context(ca, None))
            named = await api_versions(port, client_context(ca, identities["client"]))
            assert sorted(str(c.principal) for c in node.connections) == [
                "User:ANONYMOUS",
                "User:CN=client",
            ]
            await anonymous.close()
            await named.close()

    asyncio.run(run())


def test_an_untrusted_server_certificate_is_refused_by_the_node_client(
    tmp_path: Path, ca: TestCA, identities: dict[str, Identity]
) -> None:
    stranger = TestCA(tmp_path / "other-ca", name="another CA")
    config = node_config(tmp_path, ca, stranger.issue("server"))

    async def run() -> None:
        async with running(config) as node:
            with pytest.raises(NodeConnectionError):
                await api_versions(node.bound_ports["SSL"], client_context(ca, None))

    asyncio.run(run())


PLAINTEXT_API_VERSIONS = bytes.fromhex("0000001a0012000300000001000774657374696e6700000000") + b"\0"


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    ("name", "payload", "stall"),
    [
        ("plaintext Kafka frame", PLAINTEXT_API_VERSIONS, False),
        ("garbage", b"\x00\xff" * 700, False),
        ("truncated ClientHello", bytes.fromhex("160301020001"), True),
        ("nothing at all", b"", True),
    ],
)
def test_a_bad_handshake_closes_that_socket_only(
    tmp_path: Path,
    ca: TestCA,
    identities: dict[str, Identity],
    caplog: pytest.LogCaptureFixture,
    name: str,
    payload: bytes,
    stall: bool,
    loop: str,
) -> None:
    config = node_config(tmp_path, ca, identities["server"])

    async def run() -> None:
        async with running(config, timeout=1.0) as node:
            port = node.bound_ports["SSL"]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(payload)
            await writer.drain()
            # Another client is served while the bad one is open (stalled or failing).
            clock = asyncio.get_running_loop()
            started = clock.time()
            good = await api_versions(port, client_context(ca, None))
            served_in = clock.time() - started
            # The bad socket is closed by the node: EOF (or a TLS alert, then EOF).
            data = await asyncio.wait_for(reader.read(4096), 10)
            rest = await asyncio.wait_for(reader.read(), 10)
            assert not (data + rest).startswith(b"\x00\x00"), "a Kafka answer on a TLS port"
            writer.close()
            await good.close()
            print(f"{name}: good client served in {served_in * 1000:.1f} ms")
            assert served_in < 5.0  # a wedge, not a speed check

    with caplog.at_level(logging.INFO, logger="pydmq.net.tls"):
        run_on(loop, run)
    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    if stall:
        assert "taking longer than" in lines[0] or "timed out" in lines[0].lower(), lines


def test_a_certificate_no_mapping_rule_names_is_refused(
    tmp_path: Path, ca: TestCA, identities: dict[str, Identity], caplog: pytest.LogCaptureFixture
) -> None:
    config = node_config(
        tmp_path,
        ca,
        identities["server"],
        **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^O=(.*)$/$1/"},
    )

    async def run() -> None:
        async with running(config) as node:
            with pytest.raises(NodeConnectionError):
                await api_versions(
                    node.bound_ports["SSL"], client_context(ca, identities["client"])
                )

    with caplog.at_level(logging.INFO, logger="pydmq.net.connection"):
        asyncio.run(run())
    assert "no rule applies to CN=client" in caplog.text


def test_stalled_handshakes_beyond_the_cap_are_closed_at_once(
    tmp_path: Path, ca: TestCA, identities: dict[str, Identity], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections that never send a ClientHello hold a descriptor each until their handshake
    times out: past MAX_PENDING_HANDSHAKES the listener closes new sockets at once, and they
    stop costing anything once the stalled ones time out."""
    monkeypatch.setattr(tls_module, "MAX_PENDING_HANDSHAKES", 5)
    config = node_config(tmp_path, ca, identities["server"])

    async def run() -> None:
        async with running(config, timeout=1.0) as node:
            port = node.bound_ports["SSL"]
            stalled = [await asyncio.open_connection("127.0.0.1", port) for _ in range(8)]
            closed_at_once = 0
            for reader, _writer in stalled[5:]:
                data = await asyncio.wait_for(reader.read(), 0.9)  # before any timeout
                closed_at_once += data == b""
            assert closed_at_once == 3
            (listener,) = [s for s in node._servers if isinstance(s, tls_module.TlsListener)]
            assert listener.refused_handshakes == 3
            for _reader, writer in stalled:
                writer.close()
            await asyncio.sleep(1.2)  # the five stalled handshakes time out
            good = await api_versions(port, client_context(ca, None))
            await good.close()

    run_on("asyncio", run)
