"""A 3-node pydmq cluster with every listener on TLS and client certificates required: the
client, controller, control-plane and inter-broker traffic (Raft, registration and
heartbeats, LeaderAndIsr/UpdateMetadata, replica fetches) all run over mTLS with the nodes'
own ssl.* settings. A replication-factor-3 topic takes acks=all writes from confluent-kafka
and gives them back, and a follower's copy holds them: the replicas fetched over TLS.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.testing.cluster import ClusterProcess, replica_batches
from pydmq.testing.tls import PASSWORD, Identity, TestCA

from .support import key, unique_topic, value

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

COUNT = 500


@pytest.fixture(scope="module")
def tls_cluster() -> Iterator[tuple[ClusterProcess, TestCA, Identity]]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-tls-cluster-"))
    ca = TestCA(root / "certs")
    node_identity, client = ca.issue("node"), ca.issue("client")
    cluster = ClusterProcess(
        3,
        root / "nodes",
        {
            "listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:SSL,CONTROL_PLANE:SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(node_identity.p12),
            "ssl.keystore.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem),
            "ssl.client.auth": "required",
            "offsets.topic.replication.factor": "3",
            "min.insync.replicas": "2",
        },
    )
    cluster.start(timeout=90)
    try:
        yield cluster, ca, client
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_acks_all_over_mtls_everywhere(
    tls_cluster: tuple[ClusterProcess, TestCA, Identity],
) -> None:
    cluster, ca, client = tls_cluster
    config = {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca.pem),
        "ssl.certificate.location": str(client.cert_pem),
        "ssl.key.location": str(client.key_pem),
    }
    topic = unique_topic("tls-cluster")
    admin = admin_module.AdminClient(config)
    futures = admin.create_topics([admin_module.NewTopic(topic, 1, 3)], operation_timeout=30)
    futures[topic].result(60)
    producer = confluent_kafka.Producer({**config, "acks": "all", "enable.idempotence": True})
    for i in range(COUNT):
        producer.produce(topic, value(i), key(i), partition=0)
    assert producer.flush(60) == 0
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append((message.key(), message.value()))
    consumer.close()
    assert got == [(key(i), value(i)) for i in range(COUNT)]
    # Every replica holds every record (acks=all waited for the ISR, fetching over TLS).
    for node in cluster.nodes.values():
        batches = replica_batches(node.spec.data_dir, topic, 0)
        assert batches and batches[-1][1] == COUNT - 1, (node.node_id, batches[-3:])
