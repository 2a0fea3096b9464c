"""Connections cannot starve the storage engine of file descriptors.

Before the connection quotas, 1,000 idle TCP connections to a node started under
``ulimit -n 512`` took its log dir offline at the next segment creation (EMFILE), for good,
and killed its cleaner thread. Here the same node (``prlimit --nofile=512``, so it may keep
512 * 0.5 - 128 = 128 connections beside its storage share) with ``max.connections.per.ip``
at 100: one address's 1,000 connections get 100, another client keeps producing meanwhile
(new partitions too), a second address then fills the node's descriptor share, and once the
connections go every write works again and nothing acknowledged is lost.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.testing.process import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

NOFILE = 512
PER_IP = 100
BUDGET = NOFILE // 2 - 128  # what pydmq.net.connection_quotas leaves to connections


class LimitedBroker(BrokerProcess):
    """``pydmq serve`` started under a low RLIMIT_NOFILE."""

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={NOFILE}:{NOFILE}", "--", *super().command()]


@pytest.fixture
def broker() -> Iterator[LimitedBroker]:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed")
    root = Path(tempfile.mkdtemp(prefix="pydmq-conn-quotas-"))
    node = LimitedBroker(
        root / "data",
        overrides={"max.connections.per.ip": PER_IP, "group.initial.rebalance.delay.ms": 0},
        log_path=root / "broker.log",
    )
    node.start()
    try:
        yield node
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def enough_descriptors_here() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 4096) if hard != resource.RLIM_INFINITY else 4096
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ApiVersions v0 with correlation id 1 and client id "flood": an admitted connection answers it
_API_VERSIONS = struct.pack(">ihhih", 2 + 2 + 4 + 2 + 5, 18, 0, 1, 5) + b"flood"


def flood(broker: BrokerProcess, source: str, count: int) -> list[socket.socket]:
    """``count`` connections from ``source``, each sending one ApiVersions; the ones the node
    answered (the others it closed unanswered), left open and idle."""
    opened = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            sock = socket.create_connection(
                (broker.host, broker.port), timeout=10, source_address=(source, 0)
            )
            opened.append(sock)
            with contextlib.suppress(OSError):
                sock.sendall(_API_VERSIONS)
    kept = []
    for sock in opened:
        try:
            answered = len(sock.recv(4)) == 4
        except OSError:
            answered = False
        if answered:
            kept.append(sock)
        else:
            sock.close()
    return kept


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failures: list[object] = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda e, _m: e and failures.append(e))
    assert producer.flush(30) == 0 and not failures, failures


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()
    return got


def test_connections_cannot_take_the_storage_engine_down(broker: LimitedBroker) -> None:
    bootstrap = broker.bootstrap
    create(bootstrap, "before", 1)
    produce(bootstrap, "before", [b"b%d" % i for i in range(100)])

    first = flood(broker, "127.0.0.2", 1000)
    try:
        assert len(first) == PER_IP, f"{len(first)} connections of one address kept"
        # another address is served meanwhile, new partitions (new segment files) too
        create(bootstrap, "during", 4)
        produce(bootstrap, "during", [b"d%d" % i for i in range(100)])
        second = flood(broker, "127.0.0.3", PER_IP)
        try:
            assert len(first) + len(second) <= BUDGET, "past the descriptor share"
        finally:
            for sock in second:
                sock.close()
    finally:
        for sock in first:
            sock.close()

    time.sleep(0.5)
    create(bootstrap, "after", 4)  # the log dir is online: new segments are created
    produce(bootstrap, "after", [b"a%d" % i for i in range(100)])
    produce(bootstrap, "before", [b"b%d" % i for i in range(100, 200)])
    assert sorted(read_all(bootstrap, "before", 200)) == sorted(b"b%d" % i for i in range(200))
    assert len(read_all(bootstrap, "during", 100)) == 100
    log = broker.log_tail(200_000)
    assert "closing new connections" in log
    assert "offline" not in log and "Exception in thread" not in log, log[-3000:]
