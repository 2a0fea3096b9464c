"""A 3-node cluster whose every listener (client, controller, control plane) is
SASL_PLAINTEXT: the nodes authenticate to each other with PLAIN (Raft, registration and
heartbeats, the controller's pushes, follower fetches), and a client authenticates, creates a
replicated topic, produces with acks=all and consumes. A SCRAM user created through one node
(AlterUserScramCredentials, committed by the controller quorum) logs in on every node, and so
does one every node was started with (``--add-scram``, the new cluster's bootstrap records)."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.testing.cluster import ClusterProcess

from .sasl_support import JAAS_PLAIN
from .support import unique_topic

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

SASL_EVERYWHERE = {
    "listener.security.protocol.map": (
        "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,CONTROL_PLANE:SASL_PLAINTEXT"
    ),
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "sasl.jaas.config": JAAS_PLAIN,
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}


# Every node is started with --add-scram (as every KRaft node is formatted with it); the first
# active controller writes the user with the new cluster's bootstrap records.
SEEDED = "SCRAM-SHA-256=[name=erin,password=erin-secret]"
LAUNCHER = [
    sys.executable,
    "-c",
    "import sys; from pydmq.cli import main; "
    f"sys.exit(main(sys.argv[1:] + ['--add-scram', {SEEDED!r}]))",
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-sasl-cluster-"))
    running = ClusterProcess(3, root, SASL_EVERYWHERE, launcher=LAUNCHER).start()
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


def _conf(bootstrap: str, password: str = "alice-secret") -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
    }


def test_replicated_produce_and_consume(cluster: ClusterProcess) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique_topic("sasl-cluster")
    admin = AdminClient(_conf(cluster.bootstrap))
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        partitions = described.partitions.values()
        if described.error is None and all(len(p.isrs) == 3 for p in partitions):
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"the partitions of {topic} never had 3 in-sync replicas")
    producer = Producer({**_conf(cluster.bootstrap), "acks": "all"})
    for i in range(30):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(60) == 0
    consumer = Consumer(
        {**_conf(cluster.bootstrap), "group.id": topic, "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(got) < 30 and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))


def test_wrong_password_is_refused_by_every_node(cluster: ClusterProcess) -> None:
    from confluent_kafka import KafkaError, Producer

    for node_id in cluster.nodes:
        errors: list[KafkaError] = []
        producer = Producer(
            {**_conf(cluster.node(node_id).bootstrap, "wrong"), "error_cb": errors.append}
        )
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            producer.poll(0.2)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION


def test_scram_user_seeded_at_bootstrap_logs_in_on_every_node(cluster: ClusterProcess) -> None:
    from confluent_kafka import Producer

    topic = unique_topic("sasl-cluster-seed")
    for node_id in cluster.nodes:
        producer = Producer(
            {
                "bootstrap.servers": cluster.node(node_id).bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "erin",
                "sasl.password": "erin-secret",
            }
        )
        producer.produce(topic, f"from-{node_id}".encode())
        assert producer.flush(60) == 0, f"node {node_id}"


def test_scram_user_created_once_logs_in_on_every_node(cluster: ClusterProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(_conf(cluster.node(1).bootstrap))
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-secret"
            )
        ]
    )
    futures["dave"].result(60)
    topic = unique_topic("sasl-cluster-scram")
    for node_id in cluster.nodes:
        bootstrap = cluster.node(node_id).bootstrap
        node_admin = AdminClient(_conf(bootstrap))
        deadline = time.monotonic() + 30
        while True:  # the node learns the credential from the controller's next push
            described = node_admin.describe_user_scram_credentials().result(30)
            if "dave" in described or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": "dave",
                "sasl.password": "dave-secret",
            }
        )
        producer.produce(topic, f"from-{node_id}".encode())
        assert producer.flush(60) == 0, f"node {node_id}"
