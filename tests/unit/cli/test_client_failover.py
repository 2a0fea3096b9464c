"""The CLI's client when a broker dies: requests without a node go to another reachable
broker (the bootstrap servers, then the brokers the metadata named), and ``cluster up`` shows
whole lines of a dead node's log."""

from __future__ import annotations

from pathlib import Path

import pytest

from pydmq.client import BrokerUnreachableError, KafkaClient, KafkaConnectionError, parse_address
from pydmq.cluster_process import log_tail
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.testing.cluster import free_ports
from pydmq.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


def _port(broker: EmbeddedBroker) -> int:
    return parse_address(broker.bootstrap)[1]


def test_a_dead_bootstrap_broker_fails_over_to_the_next(tmp_path: Path) -> None:
    """Connected to A, A dies: Metadata (read-only) goes to B, the next bootstrap server."""
    with EmbeddedBroker(tmp_path / "b") as b:
        a = EmbeddedBroker(tmp_path / "a").start()
        try:
            with KafkaClient([a.bootstrap, b.bootstrap], timeout=5.0) as client:
                assert client.refresh_metadata([]).brokers[0].port == _port(a)
                a.stop()
                assert client.refresh_metadata([]).brokers[0].port == _port(b)
        finally:
            a.stop()


def test_brokers_named_by_the_metadata_are_failover_candidates(tmp_path: Path) -> None:
    """Bootstrapped on A only; the metadata also named another broker (B). A dies: an
    admin request that could not be sent to A goes to B."""
    with EmbeddedBroker(tmp_path / "b") as b:
        a = EmbeddedBroker(tmp_path / "a").start()
        try:
            with KafkaClient(a.bootstrap, timeout=5.0) as client:
                client.refresh_metadata([])
                client.brokers[2] = ("127.0.0.1", _port(b))  # as a cluster's Metadata lists
                a.stop()
                client.close()  # the next request opens a connection: refused by A
                request = CreateTopicsRequest(
                    topics=[CreatableTopic(name="t", num_partitions=1, replication_factor=1)],
                    timeout=5000,
                )
                response = client.call(request, CreateTopicsResponse)
                assert response.topics[0].error_code == 0
            with KafkaClient(b.bootstrap, timeout=5.0) as on_b:
                assert on_b.topic("t", refresh=True).name == "t"
        finally:
            a.stop()


def test_nothing_reachable_is_a_connection_error() -> None:
    ports = free_ports(2)
    client = KafkaClient([f"127.0.0.1:{p}" for p in ports], timeout=2.0)
    with pytest.raises(BrokerUnreachableError) as caught:
        client.refresh_metadata([])
    assert isinstance(caught.value, KafkaConnectionError)
    assert all(str(p) in caught.value.message for p in ports)


def test_log_tail_shows_whole_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "node.log"
    log.write_text("".join(f"line {i} of the node's log\n" for i in range(100)))
    tail = log_tail(log, 100)
    assert tail.splitlines()[0].startswith("line ")
    assert tail.endswith("line 99 of the node's log\n")
    assert all(line.startswith("line ") for line in tail.splitlines())
    short = tmp_path / "short.log"
    short.write_text("only line\n")
    assert log_tail(short, 100) == "only line\n"
    assert log_tail(tmp_path / "missing.log") == "(no log)"
