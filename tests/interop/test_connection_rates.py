"""Connection creation rates (KIP-612) on a real node, over real TCP.

An address's ``connection_creation_rate`` quota (set with ``pydmq quotas alter --ip``, i.e.
AlterClientQuotas): one address opening connections as fast as it can gets what the quota
allows in Kafka's windows (1/s counted over at least 10 s: 10 at once), the others are closed
unanswered after their throttle time, and a client on another address produces and reads
meanwhile. A listener's ``max.connection.creation.rate``: connections over it are served
late, not refused. Loopback only; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.testing.process import BrokerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

# ApiVersions v0, correlation id 1, client id "flood": an admitted connection answers it.
_API_VERSIONS = struct.pack(">ihhih", 2 + 2 + 4 + 2 + 5, 18, 0, 1, 5) + b"flood"


@contextlib.contextmanager
def node(overrides: dict[str, object]) -> Iterator[BrokerProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-conn-rates-"))
    broker = BrokerProcess(root / "data", overrides=overrides, log_path=root / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def connect(broker: BrokerProcess, source: str, count: int) -> list[socket.socket]:
    """``count`` connections from ``source``, each having sent one ApiVersions."""
    opened = []
    for _ in range(count):
        sock = socket.create_connection(
            (broker.host, broker.port), timeout=10, source_address=(source, 0)
        )
        sock.sendall(_API_VERSIONS)
        opened.append(sock)
    return opened


def answered(sock: socket.socket) -> bool:
    """Whether the node answered (else it closed the connection unanswered)."""
    try:
        return len(sock.recv(4)) == 4
    except OSError:
        return False
    finally:
        sock.close()


def test_an_address_over_its_creation_rate_quota_is_closed_others_are_served() -> None:
    with node({"group.initial.rebalance.delay.ms": 0}) as broker:
        bootstrap = broker.bootstrap
        assert (
            main(
                [
                    "quotas",
                    "alter",
                    "-b",
                    bootstrap,
                    "--ip",
                    "127.0.0.2",
                    "--add-config",
                    "connection_creation_rate=1",
                ]
            )
            == 0
        )
        started = time.monotonic()
        flood = connect(broker, "127.0.0.2", 15)
        opened_in = time.monotonic() - started
        verdicts = [answered(sock) for sock in flood]
        # 15 in well under 5 s is over 1/s in any window Kafka measures: 10 get in.
        assert opened_in < 5, opened_in
        assert verdicts.count(True) == 10, verdicts
        # Meanwhile another address (the default: no quota) works in full.
        topic = "rated"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce(topic, str(i).encode())
        assert producer.flush(30) == 0
        consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "rated-reader",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
        consumer.close()
        assert sorted(got, key=int) == [str(i).encode() for i in range(20)]


def test_over_a_listeners_creation_rate_connections_are_served_late() -> None:
    with node({"listener.name.plaintext.max.connection.creation.rate": 2}) as broker:
        # 2/s over at least 10 s: 20 at once are within it; the next 3 wait their turns
        # (about 0.5 s each, one after the other) and are then served.
        started = time.monotonic()
        socks = connect(broker, "127.0.0.3", 23)
        verdicts = [answered(sock) for sock in socks]
        elapsed = time.monotonic() - started
        assert verdicts == [True] * 23
        assert elapsed >= 1.0, elapsed  # the last one's turn came after two others'
