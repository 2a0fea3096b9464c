"""Dynamic broker configs on a 3-node cluster (issue 16 part 1, issue 23).

``kafka-configs --alter --entity-type brokers`` on a cluster: IncrementalAlterConfigs on the
BROKER resource "" (the cluster-wide default) sent to one broker is forwarded to the active
controller, committed as ConfigRecords and pushed to every broker in UpdateMetadata. Every
broker's DescribeConfigs then shows it (DYNAMIC_DEFAULT_BROKER_CONFIG), and a topic without its
own ``retention.ms`` takes the new ``log.retention.ms`` on every replica: the segment of records
an hour old is deleted from each node's disk, while a topic that sets ``retention.ms`` keeps
its data. The values survive a broker restart and a controller failover; a per-broker override
reaches only that broker, and a broker refuses another broker's id as Kafka does. On 4a2e8d9
the controller answered INVALID_REQUEST to every BROKER resource.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.client import KafkaClient
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import describe_configs as dc
from pydmq.protocol.messages import incremental_alter_configs as iac
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, running_cluster
from support.raw_client import RawClient

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

SET = 0
BROKER = 4
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5
HOUR_MS = 3_600_000
LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    with running_cluster(
        3,
        "pydmq-brokercfg-",
        {**FAST_FAILOVER, "log.retention.check.interval.ms": 200},
        LOG_DIR / request.node.name,
    ) as c:
        yield c


def alter(cluster: ClusterProcess, via: int, name: str, key: str, value: str) -> tuple[int, str]:
    request = iac.IncrementalAlterConfigsRequest(
        resources=[
            iac.AlterConfigsResource(
                resource_type=BROKER,
                resource_name=name,
                configs=[iac.AlterableConfig(name=key, config_operation=SET, value=value)],
            )
        ]
    )
    with RawClient(cluster.node(via).bootstrap, timeout=40) as client:
        (result,) = client.request(44, 1, request).body.responses
    return int(result.error_code), result.error_message


def described(cluster: ClusterProcess, node_id: int, name: str, key: str) -> tuple[str, int]:
    """(value, source) of ``key`` in node ``node_id``'s DescribeConfigs of BROKER ``name``."""
    request = dc.DescribeConfigsRequest(
        resources=[
            dc.DescribeConfigsResource(
                resource_type=BROKER, resource_name=name, configuration_keys=[key]
            )
        ]
    )
    with RawClient(cluster.node(node_id).bootstrap, timeout=5) as client:
        (result,) = client.request(32, 4, request).body.results
    assert result.error_code == 0, result.error_message
    (entry,) = [e for e in result.configs if e.name == key]
    return entry.value, int(entry.config_source)


def wait_described(
    cluster: ClusterProcess, node_ids: list[int], key: str, wanted: tuple[str, int]
) -> None:
    for node_id in node_ids:
        cluster.wait_for(
            f"node {node_id} describes {key} as {wanted}",
            lambda n=node_id: described(cluster, n, str(n), key) == wanted,
            timeout=20,
        )


def create_topic(cluster: ClusterProcess, name: str, configs: dict[str, str]) -> None:
    admin = confluent_admin.AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [confluent_admin.NewTopic(name, 1, 3, config=configs)], request_timeout=15
    )
    futures[name].result(20)


def first_segment(cluster: ClusterProcess, node_id: int, topic: str) -> Path:
    return cluster.node(node_id).spec.data_dir / f"{topic}-0" / f"{0:020d}.log"


def active_controller(cluster: ClusterProcess) -> int:
    addresses = [cluster.node(i).bootstrap for i in cluster.running()]
    with KafkaClient(addresses, timeout=3.0) as client:
        return int(client.refresh_metadata([]).controller_id)


def test_cluster_default_and_per_broker_configs(cluster: ClusterProcess) -> None:
    nodes = [1, 2, 3]
    # "aged" takes its retention from the brokers and rolls its segment after 1 s; "own"
    # sets retention.ms itself.
    create_topic(cluster, "aged", {"segment.ms": "1000", "min.insync.replicas": "3"})
    create_topic(
        cluster,
        "own",
        {"segment.ms": "1000", "retention.ms": str(7 * 24 * HOUR_MS), "min.insync.replicas": "3"},
    )
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    old = int(time.time() * 1000) - HOUR_MS
    for topic in ("aged", "own"):
        producer.produce(topic, b"an hour old", partition=0, timestamp=old)
    assert producer.flush(30) == 0
    del producer  # its threads would go on reconnecting to nodes the test restarts
    for node_id in nodes:
        for topic in ("aged", "own"):
            cluster.wait_for(
                f"{topic} on node {node_id}",
                lambda n=node_id, t=topic: first_segment(cluster, n, t).exists(),
                timeout=20,
            )

    # The cluster default, through a broker that need not be the controller.
    assert alter(cluster, 2, "", "log.retention.ms", "60000") == (ErrorCode.NONE, None)
    wait_described(cluster, nodes, "log.retention.ms", ("60000", DYNAMIC_DEFAULT))
    for node_id in nodes:
        assert described(cluster, node_id, "", "log.retention.ms") == ("60000", DYNAMIC_DEFAULT)
        cluster.wait_for(
            f"the hour-old segment of aged deleted on node {node_id}",
            lambda n=node_id: not first_segment(cluster, n, "aged").exists(),
            timeout=30,
        )
    assert all(first_segment(cluster, n, "own").exists() for n in nodes)

    # A per-broker override reaches only that broker; another broker's id is refused there.
    assert alter(cluster, 2, "2", "log.cleaner.backoff.ms", "20000") == (ErrorCode.NONE, None)
    wait_described(cluster, [2], "log.cleaner.backoff.ms", ("20000", DYNAMIC_BROKER))
    assert alter(cluster, 2, "3", "log.cleaner.backoff.ms", "1") == (
        ErrorCode.INVALID_REQUEST,
        "Unexpected broker id, expected 2, but received 3",
    )
    for node_id in (1, 3):
        assert described(cluster, node_id, str(node_id), "log.cleaner.backoff.ms") == (
            "15000",
            DEFAULT,
        )

    # A restarted broker learns them again from the controller.
    cluster.restart(2)
    cluster.wait_for_brokers(3, timeout=30)
    wait_described(cluster, [2], "log.cleaner.backoff.ms", ("20000", DYNAMIC_BROKER))
    wait_described(cluster, [2], "log.retention.ms", ("60000", DYNAMIC_DEFAULT))

    # A controller failover keeps them, and the new controller takes further changes.
    controller = active_controller(cluster)
    cluster.kill(controller)
    survivors = [n for n in nodes if n != controller]
    cluster.wait_for(
        "a new active controller",
        lambda: active_controller(cluster) in survivors,
        timeout=30,
    )
    cluster.start_node(controller)
    cluster.wait_for_brokers(3, timeout=30)
    wait_described(cluster, nodes, "log.retention.ms", ("60000", DYNAMIC_DEFAULT))
    wait_described(cluster, [2], "log.cleaner.backoff.ms", ("20000", DYNAMIC_BROKER))
    assert alter(cluster, survivors[0], "", "log.retention.ms", "70000") == (
        ErrorCode.NONE,
        None,
    )
    wait_described(cluster, nodes, "log.retention.ms", ("70000", DYNAMIC_DEFAULT))
