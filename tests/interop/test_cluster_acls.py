"""ACLs on a 3-node cluster (issue 19): replicated to every broker, kept across restarts.

CreateAcls sent to one broker is forwarded to the active controller, committed as
AccessControlEntryRecords in the metadata log and pushed to every broker in UpdateMetadata
(pydmq's ``acls`` fields); each broker's DescribeAcls, answered from its own authorizer, then
lists them. They survive a restart of a broker and of the whole cluster (replayed from the
metadata log; a restarted broker gets them in the controller's FULL UpdateMetadata), and a
DeleteAcls reaches every broker the same way.

The cluster runs the StandardAuthorizer with ``super.users=User:ANONYMOUS``: its inter-broker
and controller connections are PLAINTEXT, so the brokers' own principal is User:ANONYMOUS, and
Kafka requires CLUSTER_ACTION of it (a secured cluster authenticates its brokers and lists
their principal in ``super.users``; docs/SECURITY.md).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pydmq.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from pydmq.protocol.messages.describe_acls import DescribeAclsRequest
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, running_cluster
from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"
SETTINGS = {
    **FAST_FAILOVER,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
ACLS = [
    ("orders", 3, "User:alice", 3),  # (topic, pattern LITERAL, principal, READ)
    ("pay-", 4, "User:bob", 4),  # PREFIXED, WRITE
]


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    with running_cluster(3, "pydmq-acls-", SETTINGS, LOG_DIR / request.node.name) as c:
        yield c


def listed(cluster: ClusterProcess, node_id: int) -> set[tuple[str, int, str, int]]:
    request = DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
    )
    with RawClient(cluster.node(node_id).bootstrap, timeout=30) as client:
        body = client.request(29, 3, request).body
    assert body.error_code == 0, body
    return {
        (r.resource_name, r.pattern_type, a.principal, a.operation)
        for r in body.resources
        for a in r.acls
    }


def on_every_broker(cluster: ClusterProcess, wanted: set[tuple[str, int, str, int]]) -> None:
    """Until every broker lists ``wanted`` (an UpdateMetadata away), within 30 s."""
    deadline = time.monotonic() + 30
    while True:
        seen = {node_id: listed(cluster, node_id) for node_id in (1, 2, 3)}
        if all(acls == wanted for acls in seen.values()):
            return
        assert time.monotonic() < deadline, f"brokers list {seen}, not {wanted}"
        time.sleep(0.2)


def test_acls_reach_every_broker_and_survive_restarts(cluster: ClusterProcess) -> None:
    creations = [
        AclCreation(
            resource_type=2,
            resource_name=name,
            resource_pattern_type=pattern,
            principal=principal,
            host="*",
            operation=op,
            permission_type=3,
        )
        for name, pattern, principal, op in ACLS
    ]
    with RawClient(cluster.node(2).bootstrap, timeout=40) as client:
        answer = client.request(30, 3, CreateAclsRequest(creations=creations)).body
    assert [r.error_code for r in answer.results] == [0, 0]
    on_every_broker(cluster, set(ACLS))

    cluster.restart(3)
    cluster.wait_for_brokers(3, timeout=30)
    on_every_broker(cluster, set(ACLS))

    cluster.stop()
    cluster.start()
    cluster.wait_for_brokers(3, timeout=30)
    on_every_broker(cluster, set(ACLS))

    bob = DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter="User:bob", host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    with RawClient(cluster.node(1).bootstrap, timeout=40) as client:
        deleted = client.request(31, 3, DeleteAclsRequest(filters=[bob])).body
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
    on_every_broker(cluster, {ACLS[0]})
