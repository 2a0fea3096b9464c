"""A plain client impersonating the controller, a voter or a follower of a 3-node cluster.

An RF=3 topic holds acknowledged (acks=all) records. Then, on every node:

* on the client listener: a follower Fetch claiming a follower's replica id (refused, no
  records), forged StopReplica (delete, controller epoch 2^31-1, broker epoch -1,
  leader epoch -1), a LeaderAndIsr making a follower the leader, an UpdateMetadata FULL with no
  brokers and metadata offset 2^62, ControlledShutdown, and the Raft RPCs (Vote,
  BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot): each closes the connection, as an unknown
  key does; ApiVersions there advertises none of them; a Fetch of ``__cluster_metadata``
  claiming to be a voter gets an error and no records;
* on the control-plane listener: the same StopReplica, LeaderAndIsr and UpdateMetadata with
  broker epoch -1 (STALE_BROKER_EPOCH), with the node's real broker epoch and a controller
  epoch the quorum never had (NOT_CONTROLLER), with an older epoch (STALE_CONTROLLER_EPOCH)
  and with the current epoch but another controller id (NOT_CONTROLLER).

Afterwards every acknowledged record is readable, leaders and ISR are unchanged, Metadata on
every node lists 3 brokers, a new produce/consume round trip works, each node logged one
warning about the refused source, and after a graceful stop every replica holds the same
batches covering every acknowledged offset.
"""

from __future__ import annotations

import re
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
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.describe_quorum import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, replica_batches
from support.forged_pushes import forged_pushes
from support.raw_client import RawClient, encode_request_frame

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "victim"
RECORDS = 3010
HUGE_EPOCH = 2**31 - 1
# key -> version pydmq speaks between nodes
LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
VERSIONS = {4: 7, 5: 4, 6: 8, 7: 3, 52: 2, 53: 1, 54: 1, 59: 1}
RAFT_KEYS = (52, 53, 54, 59)  # Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot
API_VERSIONS = ApiVersionsRequest(client_software_name="forger", client_software_version="1.0")
_REGISTERED = re.compile(r"broker (\d+) registered with epoch (\d+)")


@pytest.fixture
def cluster() -> Iterator[ClusterProcess]:
    root = Path(tempfile.mkdtemp(prefix="pydmq-hostile-peers-"))
    c = ClusterProcess(3, root, FAST_FAILOVER)
    c.start()
    try:
        c.wait_for_brokers(3, timeout=30)
        yield c
    finally:
        c.stop()
        shutil.rmtree(root, ignore_errors=True)


# -- helpers -----------------------------------------------------------------------------------


def _partition_view(bootstrap: str) -> tuple[int, uuid.UUID, int, int, list[int], list[int]]:
    """(brokers listed, topic id, leader, leader epoch, replicas, isr) from one node."""
    with RawClient(bootstrap) as rc:
        body = rc.request(3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)])).body
    (topic,) = body.topics
    (p,) = topic.partitions
    return (
        len(body.brokers),
        topic.topic_id,
        p.leader_id,
        p.leader_epoch,
        sorted(p.replica_nodes),
        sorted(p.isr_nodes),
    )


def _quorum(cluster: ClusterProcess) -> tuple[int, int]:
    """(leader id, epoch) of the quorum, from a controller listener."""
    request = DescribeQuorumRequest(
        topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData()])]
    )
    with RawClient(cluster.node(1).controller_address) as rc:
        body = rc.request(55, 2, request).body
    p = body.topics[0].partitions[0]
    return p.leader_id, p.leader_epoch


def _broker_epoch(cluster: ClusterProcess, node_id: int) -> int:
    """The node's current registration epoch, from its own log."""
    found = [
        int(m.group(2))
        for m in _REGISTERED.finditer(cluster.node(node_id).log_path.read_text())
        if int(m.group(1)) == node_id
    ]
    assert found, f"node {node_id} never logged its registration"
    return found[-1]


def _forgeries(
    controller_id: int, epoch: int, broker_epoch: int, topic_id: uuid.UUID, follower: int
) -> list[tuple[int, Any]]:
    return forged_pushes(TOPIC, controller_id, epoch, broker_epoch, topic_id, follower)


def _assert_closed_like_an_unknown_key(address: str, api_key: int, request: Any) -> None:
    with RawClient(address) as rc:
        rc.send(encode_request_frame(api_key, VERSIONS[api_key], request, 1, "forger"))
        assert rc.wait_closed(5.0), f"key {api_key} on client listener {address} was served"


def _advertised(address: str) -> set[int]:
    with RawClient(address) as rc:
        body = rc.request(18, 3, API_VERSIONS).body
    assert body.error_code == ErrorCode.NONE
    return {k.api_key for k in body.api_keys}


def _produce(bootstrap: str, first: int, count: int) -> dict[int, int]:
    """value -> offset of every acknowledged record (acks=all, idempotent)."""
    acked: dict[int, int] = {}

    def report(err: object, msg: Any) -> None:
        assert err is None, err
        acked[int(msg.value())] = msg.offset()

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}
    )
    for value in range(first, first + count):
        producer.produce(TOPIC, value=str(value).encode(), on_delivery=report)
        if value % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert len(acked) == count
    return acked


def _consume(bootstrap: str, end: int) -> dict[int, int]:
    """value -> offset of every record of partition 0 below ``end``."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "hostile-peers-reader"}
    )
    out: dict[int, int] = {}
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < end:
            assert time.monotonic() < deadline, f"read {len(out)} of {end} records"
            for msg in consumer.consume(5000, 1.0):
                if msg.error() is None and msg.offset() < end:
                    out[int(msg.value())] = msg.offset()
    finally:
        consumer.close()
    return out


# -- the test ----------------------------------------------------------------------------------


def test_forged_controller_voter_and_follower_requests_change_nothing(
    cluster: ClusterProcess,
) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    new_topic = confluent_admin.NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})
    admin.create_topics([new_topic], request_timeout=15)[TOPIC].result(20)
    cluster.wait_for(
        "victim led with a full ISR",
        lambda: (
            (view := _partition_view(cluster.bootstrap.split(",")[0]))[2] >= 0 and len(view[5]) == 3
        ),
        timeout=30,
    )
    acked = _produce(cluster.bootstrap, 0, RECORDS)
    before = {i: _partition_view(cluster.node(i).bootstrap) for i in cluster.nodes}
    _, topic_id, leader, leader_epoch, replicas, isr = before[1]
    assert replicas == [1, 2, 3] and isr == [1, 2, 3]
    follower = next(i for i in replicas if i != leader)
    quorum_leader, quorum_epoch = _quorum(cluster)
    started = time.monotonic()

    for node_id, node in cluster.nodes.items():
        client = node.bootstrap
        # Client listener: the controller's, the voters' and ControlledShutdown are unknown.
        advertised = _advertised(client)
        assert not advertised & {4, 5, 6, 7, 52, 53, 54, 55, 59}, advertised
        for key, request in _forgeries(quorum_leader, HUGE_EPOCH, -1, topic_id, follower):
            _assert_closed_like_an_unknown_key(client, key, request)
        _assert_closed_like_an_unknown_key(
            client, CONTROLLED_SHUTDOWN, API_SCHEMAS[CONTROLLED_SHUTDOWN].request_type()
        )
        for key in RAFT_KEYS:
            _assert_closed_like_an_unknown_key(client, key, API_SCHEMAS[key].request_type())
        with RawClient(client) as rc:
            metadata_fetch = FetchRequest(
                replica_id=quorum_leader,
                max_wait=0,
                topics=[
                    FetchTopic(
                        topic="__cluster_metadata",
                        partitions=[FetchPartition(partition=0, partition_max_bytes=1 << 20)],
                    )
                ],
            )
            body = rc.request(1, 12, metadata_fetch).body
            (data,) = body.responses[0].partitions
            assert data.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert not data.records
            # A "follower" fetch of the victim from a client: refused, no records.
            follower_fetch = FetchRequest(
                replica_id=follower,
                max_wait=0,
                topics=[
                    FetchTopic(
                        topic=TOPIC,
                        partitions=[
                            FetchPartition(
                                partition=0,
                                fetch_offset=RECORDS + 1000,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            )
            (data,) = rc.request(1, 12, follower_fetch).body.responses[0].partitions
            assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert not data.records

        # Control-plane listener: only ApiVersions, the SASL exchange (17, 36: a SASL
        # control-plane listener authenticates the controller) and keys 4-6, and nothing
        # forged applies.
        plane = f"{node.host}:{node.control_plane_port}"
        assert _advertised(plane) == {4, 5, 6, 17, 18, 36}
        broker_epoch = _broker_epoch(cluster, node_id)
        cases = [
            (quorum_leader, HUGE_EPOCH, -1, ErrorCode.STALE_BROKER_EPOCH),
            (quorum_leader, HUGE_EPOCH, broker_epoch, ErrorCode.NOT_CONTROLLER),
            (quorum_leader, quorum_epoch + 1, broker_epoch, ErrorCode.NOT_CONTROLLER),
            (quorum_leader, quorum_epoch - 1, broker_epoch, ErrorCode.STALE_CONTROLLER_EPOCH),
            (quorum_leader % 3 + 1, quorum_epoch, broker_epoch, ErrorCode.NOT_CONTROLLER),
        ]
        with RawClient(plane) as rc:
            for controller_id, epoch, forged_broker_epoch, expected in cases:
                for key, request in _forgeries(
                    controller_id, epoch, forged_broker_epoch, topic_id, follower
                ):
                    answer = rc.request(key, VERSIONS[key], request).body
                    assert answer.error_code == expected, (node_id, key, controller_id, epoch)
    print(f"\nforged requests to 3 nodes answered in {time.monotonic() - started:.2f} s")

    # Nothing changed: same leader, epoch and ISR everywhere, 3 brokers listed by every node.
    after = {i: _partition_view(cluster.node(i).bootstrap) for i in cluster.nodes}
    assert after == before
    assert all(view[0] == 3 for view in after.values())
    assert (leader, leader_epoch) == after[1][2:4]
    # Every acknowledged record is readable at its offset, and a new round trip works.
    more = _produce(cluster.bootstrap, RECORDS, 10)
    read = _consume(cluster.bootstrap, RECORDS + 10)
    assert read == {**acked, **more}
    # One warning per node names the forger and what it claimed.
    for node in cluster.nodes.values():
        warnings = [
            line
            for line in node.log_path.read_text().splitlines()
            if "WARNING" in line and "refused" in line
        ]
        assert len(warnings) == 1 and "claiming controller" in warnings[0], warnings
    # Every replica holds the same batches, covering every acknowledged offset.
    cluster.stop()
    batches = {i: replica_batches(n.spec.data_dir, TOPIC, 0) for i, n in cluster.nodes.items()}
    assert batches[1] == batches[2] == batches[3]
    last = batches[1][-1]
    assert last[0] + last[1] + 1 == RECORDS + 10
