"""Client quotas on a 3-node cluster, and across restarts.

AlterClientQuotas sent to one broker is forwarded to the active controller, committed as
ClientQuotaRecords and pushed to every broker in UpdateMetadata (pydmq's tagged
``client_quotas``): every broker's DescribeClientQuotas then shows it, and every broker
throttles a producer over it. The quotas survive a broker restart (FULL UpdateMetadata)
and a whole-cluster restart (the metadata log); a single node's survive its restart (its
local metadata log).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages import alter_client_quotas as aq
from pydmq.protocol.messages import describe_client_quotas as dq
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, running_cluster
from pydmq.testing.process import BrokerProcess
from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"


def alter(bootstrap: str, client_id: str, key: str, value: float | None) -> int:
    request = aq.AlterClientQuotasRequest(
        entries=[
            aq.EntryData(
                entity=[aq.EntityData(entity_type="client-id", entity_name=client_id)],
                ops=[aq.OpData(key=key, value=value or 0.0, remove=value is None)],
            )
        ]
    )
    with RawClient(bootstrap, timeout=40) as client:
        (entry,) = client.request(49, 1, request).body.entries
    return int(entry.error_code)


def described(bootstrap: str) -> dict[str, dict[str, float]]:
    """Every client-id quota a broker describes: name -> key -> value."""
    request = dq.DescribeClientQuotasRequest(
        components=[dq.ComponentData(entity_type="client-id", match_type=2, match=None)],
        strict=True,
    )
    with RawClient(bootstrap, timeout=20) as client:
        body = client.request(48, 1, request).body
    assert body.error_code == 0, body.error_message
    return {
        str(entry.entity[0].entity_name): {v.key: v.value for v in entry.values}
        for entry in body.entries or []
    }


def produce_throttle(bootstrap: str, client_id: str, topic: str) -> int:
    """The throttle time answered to one 60 KB produce request (over a 1 KB/s quota: a new
    client's rate counts 10 s, 6 KB/s)."""
    batch = build_batch([SimpleRecord(None, b"v" * 60_000)])
    request = pr.ProduceRequest(
        acks=1,
        timeout=10_000,
        topic_data=[
            pr.TopicProduceData(
                name=topic, partition_data=[pr.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    with RawClient(bootstrap, timeout=20) as client:
        body = client.request(0, 9, request, client_id=client_id).body
    assert body.responses[0].partition_responses[0].error_code == 0
    return int(body.throttle_time)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    with running_cluster(
        3,
        "pydmq-quotas-cluster-",
        {**FAST_FAILOVER, "auto.create.topics.enable": "true"},
        LOG_DIR / request.node.name,
    ) as c:
        yield c


def _everywhere(cluster: ClusterProcess, nodes: list[int], expected: Any, what: str) -> None:
    cluster.wait_for(
        what,
        lambda: all(described(cluster.node(n).bootstrap) == expected for n in nodes),
        timeout=30,
    )


def test_quotas_replicate_to_every_broker_and_survive_restarts(cluster: ClusterProcess) -> None:
    nodes = [1, 2, 3]
    assert alter(cluster.node(2).bootstrap, "slow", "producer_byte_rate", 1000.0) == 0
    assert alter(cluster.node(3).bootstrap, "other", "consumer_byte_rate", 5000.0) == 0
    expected = {"slow": {"producer_byte_rate": 1000.0}, "other": {"consumer_byte_rate": 5000.0}}
    _everywhere(cluster, nodes, expected, "the quotas on every broker")

    # every broker enforces them: the partition's leader throttles the producer over 1 KB/s
    cluster.wait_for(
        "the topic's leader",
        lambda: _leader(cluster, "quota-cluster") is not None,
        timeout=30,
    )
    leader = _leader(cluster, "quota-cluster")
    assert leader is not None
    assert produce_throttle(cluster.node(leader).bootstrap, "slow", "quota-cluster") > 0
    assert produce_throttle(cluster.node(leader).bootstrap, "fast", "quota-cluster") == 0

    # a removal replicates; a restarted broker gets the quotas in its FULL UpdateMetadata
    cluster.stop_node(3)
    assert alter(cluster.node(1).bootstrap, "other", "consumer_byte_rate", None) == 0
    expected = {"slow": {"producer_byte_rate": 1000.0}}
    _everywhere(cluster, [1, 2], expected, "the removal on the running brokers")
    cluster.start_node(3)
    _everywhere(cluster, nodes, expected, "the quotas on the restarted broker")

    # the whole cluster restarted: from the metadata log
    cluster.stop()
    cluster.start()
    cluster.wait_for_brokers(3, timeout=30)
    _everywhere(cluster, nodes, expected, "the quotas after a cluster restart")


def _leader(cluster: ClusterProcess, topic: str) -> int | None:
    """The leader of ``topic``'s partition 0 (the Metadata request creates the topic)."""
    with RawClient(cluster.node(1).bootstrap, timeout=20) as client:
        body = client.request(
            3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=topic)])
        ).body
    for t in body.topics:
        for p in t.partitions:
            if t.error_code == 0 and p.error_code == 0 and p.leader_id >= 0:
                return int(p.leader_id)
    return None


def test_a_single_nodes_quotas_survive_its_restart(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log")
    node.start(30)
    try:
        assert alter(node.bootstrap, "kept", "request_percentage", 12.5) == 0
        assert alter(node.bootstrap, "gone", "producer_byte_rate", 10.0) == 0
        assert alter(node.bootstrap, "gone", "producer_byte_rate", None) == 0
        node.stop()
        node.start(30)
        assert described(node.bootstrap) == {"kept": {"request_percentage": 12.5}}
    finally:
        node.stop()
