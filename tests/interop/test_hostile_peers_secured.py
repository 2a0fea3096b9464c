"""An authenticated client impersonating the controller, a voter and a broker of a secured
3-node cluster (issue 19: no forged peer obeyed on an authenticated listener).

Every listener (client, controller, control plane) is SASL_PLAINTEXT and the StandardAuthorizer
is on: the nodes log in to each other as the PLAIN user ``admin``, the only super user. The
plaintext test (test_hostile_peers.py) shows that a forger who gets an epoch wrong is refused;
here ``alice`` logs in with her own password and sends requests that are right in every field
(the active controller's id and epoch, each node's real broker epoch), so only authorization
(Kafka's CLUSTER_ACTION on the cluster) stands between her and the cluster:

* control-plane listener: StopReplica (delete), LeaderAndIsr (a follower made leader) and an
  empty FULL UpdateMetadata;
* controller listener: BrokerHeartbeat asking to fence and to shut down each broker,
  AlterPartition shrinking the ISR to one replica, Vote and BeginQuorumEpoch with a higher
  epoch, BrokerRegistration of a node id that exists;
* client listener: a follower Fetch claiming a replica's id; the share-state requests of a
  partition leader to a share coordinator (Write, Initialize, Delete and Read
  ShareGroupState, the leader epoch far ahead).

Each is answered CLUSTER_AUTHORIZATION_FAILED (the Fetch: TOPIC_AUTHORIZATION_FAILED and no
records) and nothing changes: leader, epoch and ISR on every node, the quorum's leader and
epoch, three registered brokers, every acknowledged record readable at its offset.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import alter_partition as ap
from pydmq.protocol.messages import begin_quorum_epoch as bq
from pydmq.protocol.messages import broker_heartbeat as bh
from pydmq.protocol.messages import broker_registration as br
from pydmq.protocol.messages import delete_share_group_state as ds
from pydmq.protocol.messages import describe_quorum as dq
from pydmq.protocol.messages import initialize_share_group_state as ini
from pydmq.protocol.messages import read_share_group_state as rs
from pydmq.protocol.messages import vote as vo
from pydmq.protocol.messages import write_share_group_state as ws
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess
from support.forged_pushes import forged_pushes
from support.raw_client import RawClient

from .sasl_support import JAAS_PLAIN, USERS

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

TOPIC = "guarded"
RECORDS = 500
SECURED = {
    **FAST_FAILOVER,
    "listener.security.protocol.map": (
        "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT,CONTROL_PLANE:SASL_PLAINTEXT"
    ),
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.mechanism.controller.protocol": "PLAIN",
    "sasl.jaas.config": JAAS_PLAIN,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "allow.everyone.if.no.acl.found": "false",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
}
CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": "admin-secret",
}
DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-hostile-secured-"))
    c = ClusterProcess(3, root, SECURED)
    c.start()
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


class Session:
    """A RawClient logged in with SASL PLAIN; requests at the listener's highest version."""

    def __init__(self, address: str, user: str) -> None:
        self.client = RawClient(address)
        body = self.client.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).body
        assert body.error_code == ErrorCode.NONE, body
        token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
        body = self.client.request(36, 2, SaslAuthenticateRequest(auth_bytes=token)).body
        assert body.error_code == ErrorCode.NONE, body
        versions = self.client.request(
            18, 3, ApiVersionsRequest(client_software_name="forger", client_software_version="1")
        ).body
        self.versions = {k.api_key: k.max_version for k in versions.api_keys}

    def request(self, api_key: int, body: Any) -> Any:
        return self.client.request(api_key, self.versions[api_key], body).body

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()


def _view(cluster: ClusterProcess, node_id: int) -> tuple[int, uuid.UUID, int, int, list[int]]:
    """(brokers listed, topic id, leader, leader epoch, isr) from one node, as admin."""
    with Session(cluster.node(node_id).bootstrap, "admin") as s:
        body = s.request(3, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
    (topic,) = body.topics
    (p,) = topic.partitions
    return len(body.brokers), topic.topic_id, p.leader_id, p.leader_epoch, sorted(p.isr_nodes)


def _quorum(cluster: ClusterProcess) -> tuple[int, int]:
    request = dq.DescribeQuorumRequest(
        topics=[dq.TopicData(topic_name="__cluster_metadata", partitions=[dq.PartitionData()])]
    )
    with Session(cluster.node(1).controller_address, "admin") as s:
        p = s.request(55, request).topics[0].partitions[0]
    return p.leader_id, p.leader_epoch


def _broker_epochs(cluster: ClusterProcess) -> dict[int, int]:
    """Each node's current registration epoch, from its own log."""
    out = {}
    for node_id, node in cluster.nodes.items():
        words = [
            line.split()
            for line in node.log_path.read_text().splitlines()
            if f"broker {node_id} registered with epoch" in line
        ]
        assert words, f"node {node_id} never logged its registration"
        out[node_id] = int(words[-1][words[-1].index("epoch") + 1].rstrip(",.;"))
    return out


def _controller_forgeries(
    cluster_id: str, epochs: dict[int, int], quorum: tuple[int, int], topic_id: uuid.UUID
) -> list[tuple[int, Any]]:
    leader, epoch = quorum
    out: list[tuple[int, Any]] = []
    for node_id, broker_epoch in epochs.items():
        out.append(
            (
                63,
                bh.BrokerHeartbeatRequest(
                    broker_id=node_id,
                    broker_epoch=broker_epoch,
                    current_metadata_offset=2**40,
                    want_fence=True,
                    want_shut_down=True,
                ),
            )
        )
    out.append(
        (
            56,
            ap.AlterPartitionRequest(
                broker_id=leader,
                broker_epoch=epochs[leader],
                topics=[
                    ap.TopicData(
                        topic_id=topic_id,
                        partitions=[
                            ap.PartitionData(
                                partition_index=0,
                                leader_epoch=0,
                                new_isr=[leader],
                                new_isr_with_epochs=[
                                    ap.BrokerState(broker_id=leader, broker_epoch=epochs[leader])
                                ],
                                partition_epoch=0,
                            )
                        ],
                    )
                ],
            ),
        )
    )
    voter = next(i for i in epochs if i != leader)
    out.append(
        (
            52,
            vo.VoteRequest(
                cluster_id=cluster_id,
                voter_id=leader,
                topics=[
                    vo.TopicData(
                        topic_name="__cluster_metadata",
                        partitions=[
                            vo.PartitionData(
                                partition_index=0,
                                replica_epoch=epoch + 10,
                                replica_id=voter,
                                last_offset_epoch=epoch + 10,
                                last_offset=2**40,
                            )
                        ],
                    )
                ],
            ),
        )
    )
    out.append(
        (
            53,
            bq.BeginQuorumEpochRequest(
                cluster_id=cluster_id,
                topics=[
                    bq.TopicData(
                        topic_name="__cluster_metadata",
                        partitions=[
                            bq.PartitionData(
                                partition_index=0, leader_id=voter, leader_epoch=epoch + 10
                            )
                        ],
                    )
                ],
            ),
        )
    )
    out.append(
        (
            62,
            br.BrokerRegistrationRequest(
                broker_id=voter, cluster_id=cluster_id, incarnation_id=uuid.uuid4()
            ),
        )
    )
    return out


def _share_state_forgeries(topic_id: uuid.UUID) -> list[tuple[int, Any]]:
    """A partition leader's requests to a share coordinator (KIP-932): state written at a
    leader epoch far ahead (which would fence the real leader), re-initialized, deleted, read."""
    return [
        (
            85,
            ws.WriteShareGroupStateRequest(
                group_id="forged",
                topics=[
                    ws.WriteStateData(
                        topic_id=topic_id,
                        partitions=[
                            ws.PartitionData(partition=0, leader_epoch=1 << 20, start_offset=0)
                        ],
                    )
                ],
            ),
        ),
        (
            83,
            ini.InitializeShareGroupStateRequest(
                group_id="forged",
                topics=[
                    ini.InitializeStateData(
                        topic_id=topic_id,
                        partitions=[ini.PartitionData(partition=0, state_epoch=1 << 20)],
                    )
                ],
            ),
        ),
        (
            86,
            ds.DeleteShareGroupStateRequest(
                group_id="forged",
                topics=[
                    ds.DeleteStateData(
                        topic_id=topic_id, partitions=[ds.PartitionData(partition=0)]
                    )
                ],
            ),
        ),
        (
            84,
            rs.ReadShareGroupStateRequest(
                group_id="forged",
                topics=[
                    rs.ReadStateData(
                        topic_id=topic_id,
                        partitions=[rs.PartitionData(partition=0, leader_epoch=1 << 20)],
                    )
                ],
            ),
        ),
    ]


def _top_level_error(body: Any) -> int:
    if hasattr(body, "error_code"):
        return int(body.error_code)
    raise AssertionError(f"no error code in {body!r}")


def _produce(bootstrap: str) -> dict[int, int]:
    acked: dict[int, int] = {}

    def report(err: object, msg: Any) -> None:
        assert err is None, err
        acked[int(msg.value())] = msg.offset()

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, **CLIENT}
    )
    for value in range(RECORDS):
        producer.produce(TOPIC, value=str(value).encode(), on_delivery=report)
    assert producer.flush(30) == 0
    assert len(acked) == RECORDS
    return acked


def _consume(bootstrap: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "guarded-reader", **CLIENT}
    )
    out: dict[int, int] = {}
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < RECORDS:
            assert time.monotonic() < deadline, f"read {len(out)} of {RECORDS} records"
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    out[int(msg.value())] = msg.offset()
    finally:
        consumer.close()
    return out


def test_authenticated_forger_is_refused_on_every_listener(cluster: ClusterProcess) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap, **CLIENT})
    new_topic = confluent_admin.NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic], request_timeout=15)[TOPIC].result(30)
    cluster.wait_for(
        "guarded led with a full ISR",
        lambda: (view := _view(cluster, 1))[2] >= 0 and len(view[4]) == 3,
        timeout=30,
    )
    acked = _produce(cluster.bootstrap)
    before = {i: _view(cluster, i) for i in cluster.nodes}
    _, topic_id, leader, _, isr = before[1]
    follower = next(i for i in isr if i != leader)
    quorum = _quorum(cluster)
    epochs = _broker_epochs(cluster)
    cluster_id = admin.describe_cluster().result(15).cluster_id

    for node_id, node in cluster.nodes.items():
        with Session(f"{node.host}:{node.control_plane_port}", "alice") as s:
            for key, request in forged_pushes(
                TOPIC, quorum[0], quorum[1], epochs[node_id], topic_id, follower
            ):
                assert _top_level_error(s.request(key, request)) == DENIED, (node_id, key)
        with Session(node.controller_address, "alice") as s:
            for key, request in _controller_forgeries(cluster_id, epochs, quorum, topic_id):
                assert _top_level_error(s.request(key, request)) == DENIED, (node_id, key)
        with Session(node.bootstrap, "alice") as s:
            fetch = FetchRequest(
                replica_id=follower,
                max_wait=0,
                topics=[
                    FetchTopic(
                        topic_id=topic_id,
                        topic=TOPIC,
                        partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                    )
                ],
            )
            (data,) = s.request(1, fetch).responses[0].partitions
            assert data.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, data.error_code
            assert not data.records
            for key, request in _share_state_forgeries(topic_id):
                answer = s.request(key, request)
                (result,) = answer.results[0].partitions
                assert result.error_code == DENIED, (node_id, key)

    # Nothing changed.
    time.sleep(2)  # two broker session timeouts: a fence or shutdown would have shown by now
    assert {i: _view(cluster, i) for i in cluster.nodes} == before
    assert _quorum(cluster) == quorum
    assert _broker_epochs(cluster) == epochs
    assert _consume(cluster.bootstrap) == acked
