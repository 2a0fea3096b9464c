"""``pydmq cluster up 3 --secure``: a local cluster with TLS everywhere, SCRAM for clients,
mTLS between nodes and ACLs on, used through the client configs it writes:

* confluent-kafka with ``librdkafka.properties`` creates a replication-factor-3 topic, writes
  with acks=all and reads everything back; Kafka's CLI format (``client.properties``) works
  with ``pydmq topics describe --command-config``;
* a plaintext client, and a SASL_SSL client with a wrong password, get nowhere; a SCRAM user
  the admin creates sees nothing until an ACL allows it (ACLs are on);
* a second ``cluster up --secure`` on the same data directory reuses the material: the admin
  user (kept in the cluster's metadata since the first start) still logs in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from pydmq.cli.secure_cluster import ADMIN, MECHANISM

from .cluster_up import cluster_up

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]

COUNT = 200


def _props(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def _stop(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 0, out


def test_secure_cluster_up(tmp_path: Path) -> None:
    root = tmp_path / "cluster"
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    with cluster_up(root, "--secure") as (process, bootstrap, _):
        conf = {"bootstrap.servers": bootstrap, **_props(root / "secure" / "librdkafka.properties")}
        assert conf["sasl.username"] == ADMIN and conf["sasl.mechanisms"] == MECHANISM
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
        producer = ck.Producer({**conf, "acks": "all", "enable.idempotence": True})
        for i in range(COUNT):
            producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
        assert producer.flush(60) == 0
        consumer = ck.Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen: set[bytes] = set()
        for _ in range(300):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
            if len(seen) == COUNT:
                break
        consumer.close()
        assert len(seen) == COUNT

        cli = subprocess.run(
            [sys.executable, "-m", "pydmq", "topics", "describe", topic, "-b", bootstrap,
             "--command-config", str(root / "secure" / "client.properties")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cli.returncode == 0 and "ReplicationFactor: 3" in cli.stdout, cli.stderr

        # no TLS: the listener speaks TLS only; a wrong password: authentication fails
        plain = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000})
        with pytest.raises(ck.KafkaException):
            plain.list_topics(timeout=5)
        wrong = AdminClient({**conf, "sasl.password": "not-the-password"})
        with pytest.raises(ck.KafkaException):
            wrong.list_topics(timeout=5)

        # ACLs are on: a new SCRAM user sees the topic only once allowed
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
        )
        admin.alter_user_scram_credentials([upsert])["alice"].result(30)
        alice = AdminClient({**conf, "sasl.username": "alice", "sasl.password": "alice-secret"})
        assert topic not in _visible(alice)
        acl = AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
            AclOperation.DESCRIBE, AclPermissionType.ALLOW,
        )  # fmt: skip
        admin.create_acls([acl])[acl].result(30)
        assert topic in _visible(alice, wait_for=topic)
        _stop(process)

    with cluster_up(root, "--secure") as (process, bootstrap, _):
        conf = {"bootstrap.servers": bootstrap, **_props(root / "secure" / "librdkafka.properties")}
        assert topic in AdminClient(conf).list_topics(timeout=30).topics
        _stop(process)


def _visible(client: AdminClient, wait_for: str | None = None) -> set[str]:
    """The topics Metadata lists to ``client`` (retried until ``wait_for`` shows, bounded:
    an ACL reaches every node through the metadata log)."""
    names: set[str] = set()
    for _ in range(60):
        names = set(client.list_topics(timeout=10).topics)
        if wait_for is None or wait_for in names:
            break
        time.sleep(0.5)
    return names
