"""Authorization, differential: the same ACLs and requests on the reference Kafka 4.4 and pydmq.

Both brokers run the StandardAuthorizer with ``allow.everyone.if.no.acl.found=false`` and
``super.users=User:admin``. A scenario's requests come as User:ANONYMOUS over PLAINTEXT (a
raw client on each broker's client listener) or, when the scenario names a user, as that
SASL principal (``User:alice``, ``User:bob``, ``User:admin``: PLAIN on a SASL_PLAINTEXT
listener ``USERS`` both brokers open with the same JAAS users), so ACLs naming several
principals, the wildcard principal and hosts are compared too. The admin, who creates the
topics and sets each scenario's ACLs, is User:admin: on Kafka over a SASL_PLAINTEXT listener
(PLAIN, which is also the inter-broker and controller listener, so Kafka's own requests are a
super user's); on pydmq through its handlers in process with a RequestContext carrying
User:admin (tests/support/principal_calls.py). The admin's side is one small class per broker
(:class:`KafkaSide`, :class:`PydmqSide`).

Each scenario is an ACL set (applied after deleting every ACL; on Kafka the test waits until
DescribeAcls lists them, which is the authorizer's own view) and a list of probes; each probe
is one request whose observation (error codes, visible topic names) must be equal on both
brokers. :data:`SCENARIOS` holds more than 50 (ACL set, request) cases.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from differential_support import ReferenceKafka, reference_kafka_unavailable  # noqa: E402

from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest  # noqa: E402
from pydmq.protocol.messages.create_partitions import (  # noqa: E402
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from pydmq.protocol.messages.create_topics import (  # noqa: E402
    CreatableTopic,
    CreateTopicsRequest,
)
from pydmq.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest  # noqa: E402
from pydmq.protocol.messages.delete_groups import DeleteGroupsRequest  # noqa: E402
from pydmq.protocol.messages.delete_records import (  # noqa: E402
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState  # noqa: E402
from pydmq.protocol.messages.describe_acls import DescribeAclsRequest  # noqa: E402
from pydmq.protocol.messages.describe_cluster import DescribeClusterRequest  # noqa: E402
from pydmq.protocol.messages.describe_configs import (  # noqa: E402
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.describe_groups import DescribeGroupsRequest  # noqa: E402
from pydmq.protocol.messages.describe_log_dirs import DescribeLogDirsRequest  # noqa: E402
from pydmq.protocol.messages.describe_producers import (  # noqa: E402
    DescribeProducersRequest,
    TopicRequest,
)
from pydmq.protocol.messages.end_txn import EndTxnRequest  # noqa: E402
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic  # noqa: E402
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest  # noqa: E402
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest  # noqa: E402
from pydmq.protocol.messages.join_group import (  # noqa: E402
    JoinGroupRequest,
    JoinGroupRequestProtocol,
)
from pydmq.protocol.messages.list_offsets import (  # noqa: E402
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic  # noqa: E402
from pydmq.protocol.messages.offset_fetch import (  # noqa: E402
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from pydmq.protocol.messages.offset_for_leader_epoch import (  # noqa: E402
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from pydmq.protocol.messages.sasl_authenticate import SaslAuthenticateRequest  # noqa: E402
from pydmq.protocol.messages.sasl_handshake import SaslHandshakeRequest  # noqa: E402
from pydmq.protocol.records import SimpleRecord, build_batch  # noqa: E402
from pydmq.testing import EmbeddedBroker  # noqa: E402
from pydmq.testing.process import free_port  # noqa: E402
from support.broker_checks import produce_request  # noqa: E402
from support.principal_calls import call_as  # noqa: E402
from support.raw_client import RawClient  # noqa: E402

pytestmark = pytest.mark.timeout(900)

ADMIN = "User:admin"
ANONYMOUS = "User:ANONYMOUS"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SETTINGS = {
    "authorizer.class.name": STANDARD,
    "super.users": ADMIN,
    "allow.everyone.if.no.acl.found": "false",
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
# The SASL principals of the USERS listener (PLAIN), on both brokers.
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
USERS_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    + ";"
)
TOPICS = ("acl-orders", "acl-payments", "app-logs")
ACL_WAIT_S = 30.0

# Kafka's codes (org.apache.kafka.common.acl / resource)
TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
DENY, ALLOW = 2, 3
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
COORDINATOR_NOT_READY = (14, 15, 16)


@dataclass(frozen=True)
class Acl:
    """One ACL of a scenario (Kafka's codes)."""

    rtype: int
    name: str
    op: int
    perm: int = ALLOW
    pattern: int = LITERAL
    principal: str = ANONYMOUS
    host: str = "*"


# -- the two brokers: the admin's side ----------------------------------------------------------


class KafkaSide:
    """The reference Kafka; its admin is User:admin over SASL_PLAINTEXT (PLAIN)."""

    name = "kafka"

    def __init__(self) -> None:
        self.kafka = ReferenceKafka({})
        self.admin_port = free_port()
        self.users_port = free_port()
        jaas = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="admin" password="admin-secret" user_admin="admin-secret";'
        )
        k = self.kafka
        self.kafka.props_lines = [
            f"listeners=PLAINTEXT://127.0.0.1:{k.port},ADMIN://127.0.0.1:{self.admin_port},"
            f"USERS://127.0.0.1:{self.users_port},CONTROLLER://127.0.0.1:{k.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{k.port},"
            f"ADMIN://127.0.0.1:{self.admin_port},USERS://127.0.0.1:{self.users_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,ADMIN:SASL_PLAINTEXT,"
            "USERS:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            f"listener.name.users.plain.sasl.jaas.config={USERS_JAAS}",
            "inter.broker.listener.name=ADMIN",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "sasl.mechanism.controller.protocol=PLAIN",
            f"listener.name.admin.plain.sasl.jaas.config={jaas}",
            f"listener.name.controller.plain.sasl.jaas.config={jaas}",
            *(f"{k}={v}" for k, v in SETTINGS.items()),
        ]
        self.admin: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def users_bootstrap(self) -> str:
        return f"127.0.0.1:{self.users_port}"

    def start(self) -> None:
        self.kafka.start()
        self.admin = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{self.admin_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            }
        )
        deadline = time.monotonic() + 120
        while True:
            if not self.kafka.alive():
                raise RuntimeError(f"reference Kafka exited\n{self.kafka.log_tail()}")
            try:
                self.admin.list_topics(timeout=2)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def create_topics(self, names: tuple[str, ...]) -> None:
        assert self.admin is not None
        futures = self.admin.create_topics([NewTopic(n, 1, 1) for n in names])
        for future in futures.values():
            future.result(30)

    def set_acls(self, acls: list[Acl]) -> None:
        assert self.admin is not None
        every = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
            AclOperation.ANY, AclPermissionType.ANY,
        )  # fmt: skip
        for future in self.admin.delete_acls([every]).values():
            future.result(30)
        if acls:
            for future in self.admin.create_acls([_binding(a) for a in acls]).values():
                future.result(30)
        deadline = time.monotonic() + ACL_WAIT_S
        while len(self.admin.describe_acls(every).result(30)) != len(set(acls)):
            assert time.monotonic() < deadline, "Kafka's authorizer did not list the ACLs"
            time.sleep(0.1)

    def stop(self) -> None:
        self.kafka.stop()
        self.kafka.cleanup()


def _binding(acl: Acl) -> AclBinding:
    return AclBinding(
        ResourceType(acl.rtype),
        acl.name,
        ResourcePatternType(acl.pattern),
        acl.principal,
        acl.host,
        AclOperation(acl.op),
        AclPermissionType(acl.perm),
    )


class PydmqSide:
    """pydmq in process; its admin's requests reach its handlers as User:admin."""

    name = "pydmq"

    def __init__(self, data_dir: Path) -> None:
        self.users_port = free_port()
        users = {
            "listeners": f"PLAINTEXT://127.0.0.1:0,USERS://127.0.0.1:{self.users_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,USERS:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.users.plain.sasl.jaas.config": USERS_JAAS,
        }
        self.embedded = EmbeddedBroker(data_dir, overrides={**SETTINGS, **users})

    @property
    def bootstrap(self) -> str:
        return self.embedded.bootstrap

    @property
    def users_bootstrap(self) -> str:
        return f"127.0.0.1:{self.users_port}"

    def start(self) -> None:
        self.embedded.start()

    def create_topics(self, names: tuple[str, ...]) -> None:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in names],
            timeout=30_000,
        )
        answer = call_as(self.embedded, ADMIN, 19, 7, request)
        assert all(t.error_code == 0 for t in answer.topics), answer

    def set_acls(self, acls: list[Acl]) -> None:
        every = DeleteAclsFilter(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1,
        )  # fmt: skip
        deleted = call_as(self.embedded, ADMIN, 31, 3, DeleteAclsRequest(filters=[every]))
        assert deleted.filter_results[0].error_code == 0
        if acls:
            creations = [
                AclCreation(
                    resource_type=a.rtype,
                    resource_name=a.name,
                    resource_pattern_type=a.pattern,
                    principal=a.principal,
                    host=a.host,
                    operation=a.op,
                    permission_type=a.perm,
                )
                for a in acls
            ]
            answer = call_as(self.embedded, ADMIN, 30, 3, CreateAclsRequest(creations=creations))
            assert all(r.error_code == 0 for r in answer.results), answer

    def stop(self) -> None:
        self.embedded.stop()


# -- probes: one request as User:ANONYMOUS, its observation -------------------------------------

Probe = Callable[[RawClient], Any]


def settled(ask: Callable[[], Any]) -> Any:
    """``ask()`` again while its first code says the coordinator is not ready yet (Kafka
    creates and loads its internal topics asynchronously; clients retry these codes)."""
    for _ in range(200):
        answer = ask()
        first = answer[0] if isinstance(answer, list) else answer
        if first not in COORDINATOR_NOT_READY:
            return answer
        time.sleep(0.1)
    return answer


def visible_topics(c: RawClient) -> Any:
    body = c.request(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)).body
    return sorted(t.name for t in body.topics if not t.name.startswith("__"))


def metadata(name: str, auto: bool = False) -> Probe:
    def probe(c: RawClient) -> Any:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=auto
        )
        return [(t.name, t.error_code) for t in c.request(3, 12, request).body.topics]

    return probe


def produce(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = produce_request(topic, build_batch([SimpleRecord(b"k", b"v")]), acks=1)
        body = c.request(0, 9, request).body
        return body.responses[0].partition_responses[0].error_code

    return probe


def fetch(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = FetchRequest(
            replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[FetchTopic(topic=topic, partitions=[
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )  # fmt: skip
        body = c.request(1, 12, request).body
        return [body.error_code, body.responses[0].partitions[0].error_code]

    return probe


def list_offsets(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsPartition(partition_index=0, timestamp=-1)])],
        )  # fmt: skip
        return c.request(2, 7, request).body.topics[0].partitions[0].error_code

    return probe


def find_coordinator(key: str, key_type: int = 0) -> Probe:
    def probe(c: RawClient) -> Any:
        request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        return settled(lambda: c.request(10, 4, request).body.coordinators[0].error_code)

    return probe


def join_group(group: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = JoinGroupRequest(
            group_id=group, session_timeout=10_000, rebalance_timeout=10_000, member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
        )  # fmt: skip
        return settled(lambda: c.request(11, 9, request).body.error_code)

    return probe


def offset_fetch(group: str, topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = OffsetFetchRequest(
            groups=[OffsetFetchRequestGroup(group_id=group, topics=[
                OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])],
        )  # fmt: skip

        def ask() -> Any:
            group_answer = c.request(9, 8, request).body.groups[0]
            codes = [p.error_code for t in group_answer.topics for p in t.partitions]
            return [group_answer.error_code, codes]

        return settled(ask)

    return probe


def create_topic(name: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1)],
            timeout=10_000,
            validate_only=True,
        )
        return c.request(19, 7, request).body.topics[0].error_code

    return probe


def delete_topic(name: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DeleteTopicsRequest(topics=[DeleteTopicState(name=name)], timeout=10_000)
        return c.request(20, 6, request).body.responses[0].error_code

    return probe


def init_producer_id(txn: str | None = None) -> Probe:
    def probe(c: RawClient) -> Any:
        request = InitProducerIdRequest(
            transactional_id=txn, transaction_timeout=60_000, producer_id=-1, producer_epoch=-1
        )
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS (retriable) while its broker obtains its
        # first block of producer ids: asked again, as a client does.
        return settled(lambda: c.request(22, 4, request).body.error_code)

    return probe


def describe_configs(resource_type: int, name: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DescribeConfigsRequest(
            resources=[DescribeConfigsResource(resource_type=resource_type, resource_name=name,
                                               configuration_keys=["cleanup.policy"])],
        )  # fmt: skip
        return c.request(32, 4, request).body.results[0].error_code

    return probe


def create_partitions(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name=topic, count=2, assignments=None)],
            timeout=10_000,
            validate_only=True,
        )
        return c.request(37, 3, request).body.results[0].error_code

    return probe


def describe_group(group: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DescribeGroupsRequest(groups=[group])
        return settled(lambda: c.request(15, 5, request).body.groups[0].error_code)

    return probe


def delete_group(group: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DeleteGroupsRequest(groups_names=[group])
        return settled(lambda: c.request(42, 2, request).body.results[0].error_code)

    return probe


def describe_acls(c: RawClient) -> Any:
    request = DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
    )
    return c.request(29, 3, request).body.error_code


def create_acl(c: RawClient) -> Any:
    creation = AclCreation(
        resource_type=TOPIC, resource_name="acl-made-by-anonymous", resource_pattern_type=LITERAL,
        principal="User:nobody", host="*", operation=READ, permission_type=ALLOW,
    )  # fmt: skip
    return c.request(30, 3, CreateAclsRequest(creations=[creation])).body.results[0].error_code


def describe_log_dirs(c: RawClient) -> Any:
    return c.request(35, 4, DescribeLogDirsRequest(topics=[])).body.error_code


def cluster_operations(c: RawClient) -> Any:
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    body = c.request(60, 1, request).body
    return [body.error_code, body.cluster_authorized_operations]


def delete_records(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DeleteRecordsRequest(
            topics=[DeleteRecordsTopic(name=topic, partitions=[
                DeleteRecordsPartition(partition_index=0, offset=0)])],
            timeout=10_000,
        )  # fmt: skip
        return c.request(21, 2, request).body.topics[0].partitions[0].error_code

    return probe


def offset_for_leader_epoch(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = OffsetForLeaderEpochRequest(
            replica_id=-1,
            topics=[OffsetForLeaderTopic(topic=topic, partitions=[
                OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])],
        )  # fmt: skip
        return c.request(23, 4, request).body.topics[0].partitions[0].error_code

    return probe


def describe_producers(topic: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[0])])
        return c.request(61, 0, request).body.topics[0].partitions[0].error_code

    return probe


def end_txn(txn: str) -> Probe:
    def probe(c: RawClient) -> Any:
        request = EndTxnRequest(
            transactional_id=txn, producer_id=1, producer_epoch=0, committed=False
        )
        return settled(lambda: c.request(26, 3, request).body.error_code)

    return probe


@dataclass(frozen=True)
class Scenario:
    name: str
    acls: list[Acl]
    probes: list[tuple[str, Probe]]
    user: str | None = None  # probe as this SASL user (USERS listener), else ANONYMOUS


def login(client: RawClient, user: str) -> None:
    """SASL PLAIN as ``user`` on the USERS listener (SaslHandshake v1, SaslAuthenticate v2)."""
    handshake = client.request(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).body
    assert handshake.error_code == 0, handshake
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    answer = client.request(36, 2, SaslAuthenticateRequest(auth_bytes=token)).body
    assert answer.error_code == 0, answer


def P(label: str, probe: Probe) -> tuple[str, Probe]:
    return (label, probe)


O, PAY, LOGS = TOPICS  # noqa: E741
ALICE, BOB, EVERYONE = "User:alice", "User:bob", "User:*"

# ACLs naming SASL principals, probed as each of them (and as the super user)
_ALICE_AND_BOB = [
    Acl(TOPIC, O, READ, principal=ALICE),
    Acl(TOPIC, O, WRITE, principal=BOB),
    Acl(GROUP, "g-alice", READ, principal=ALICE),
    Acl(TXN_ID, "tx-bob", WRITE, principal=BOB),
    Acl(CLUSTER, "kafka-cluster", CREATE, principal=ALICE),
]
_EVERYONE_BUT_BOB = [
    Acl(TOPIC, "acl-", READ, pattern=PREFIXED, principal=EVERYONE),
    Acl(TOPIC, PAY, READ, DENY, principal=BOB),
]
_HOSTS = [
    Acl(TOPIC, O, READ, principal=ALICE, host="127.0.0.1"),
    Acl(TOPIC, PAY, READ, principal=ALICE, host="10.9.9.9"),
]
MULTI_PRINCIPAL = [
    Scenario(
        "alice and bob, as alice",
        _ALICE_AND_BOB,
        [
            P("metadata, all topics", visible_topics),
            P("fetch (her READ)", fetch(O)),
            P("produce (bob's WRITE)", produce(O)),
            P("join her group", join_group("g-alice")),
            P("offset fetch of her group", offset_fetch("g-alice", O)),
            P("bob's transactional id", init_producer_id("tx-bob")),
            P("create topic (her cluster CREATE)", create_topic("acl-new-alice")),
            P("describe acls (not hers)", describe_acls),
        ],
        user="alice",
    ),
    Scenario(
        "alice and bob, as bob",
        _ALICE_AND_BOB,
        [
            P("metadata, all topics", visible_topics),
            P("fetch (alice's READ)", fetch(O)),
            P("produce (his WRITE)", produce(O)),
            P("join alice's group", join_group("g-alice")),
            P("his transactional id", init_producer_id("tx-bob")),
            P("create topic (alice's cluster CREATE)", create_topic("acl-new-bob")),
        ],
        user="bob",
    ),
    Scenario(
        "alice and bob, as ANONYMOUS",
        _ALICE_AND_BOB,
        [
            P("metadata, all topics", visible_topics),
            P("fetch", fetch(O)),
            P("produce", produce(O)),
        ],
    ),
    Scenario(
        "User:* on a prefix, DENY for bob, as alice",
        _EVERYONE_BUT_BOB,
        [
            P("fetch", fetch(O)),
            P("fetch the denied topic", fetch(PAY)),
            P("fetch outside the prefix", fetch(LOGS)),
            P("metadata, all topics", visible_topics),
        ],
        user="alice",
    ),
    Scenario(
        "User:* on a prefix, DENY for bob, as bob",
        _EVERYONE_BUT_BOB,
        [
            P("fetch", fetch(O)),
            P("fetch the denied topic", fetch(PAY)),
            P("metadata, all topics", visible_topics),
        ],
        user="bob",
    ),
    Scenario(
        "User:* on a prefix, DENY for bob, as ANONYMOUS",
        _EVERYONE_BUT_BOB,
        [
            P("fetch", fetch(O)),
            P("fetch the denied topic", fetch(PAY)),
        ],
    ),
    Scenario(
        "ACLs by host, as alice",
        _HOSTS,
        [
            P("fetch (her host)", fetch(O)),
            P("fetch (another host)", fetch(PAY)),
            P("metadata, all topics", visible_topics),
        ],
        user="alice",
    ),
    Scenario(
        "the super user over SASL",
        [Acl(TOPIC, "*", ALL, DENY, principal=EVERYONE)],
        [
            P("fetch (DENY does not bind a super user)", fetch(O)),
            P("produce", produce(O)),
            P("describe acls", describe_acls),
            P("metadata, all topics", visible_topics),
        ],
        user="admin",
    ),
]
SCENARIOS = [
    Scenario(
        "no ACL",
        [],
        [
            P("metadata, all topics", visible_topics),
            P("metadata, a named topic", metadata(O)),
            P("metadata, auto-creation", metadata("acl-new-1", auto=True)),
            P("produce", produce(O)),
            P("fetch", fetch(O)),
            P("list offsets", list_offsets(O)),
            P("find group coordinator", find_coordinator("g1")),
            P("find transaction coordinator", find_coordinator("tx-1", 1)),
            P("join group", join_group("g1")),
            P("offset fetch", offset_fetch("g1", O)),
            P("create topic", create_topic("acl-new-2")),
            P("delete topic", delete_topic(O)),
            P("idempotent producer id", init_producer_id()),
            P("transactional producer id", init_producer_id("tx-1")),
            P("describe topic configs", describe_configs(2, O)),
            P("describe broker configs", describe_configs(4, "1")),
            P("create partitions", create_partitions(O)),
            P("describe group", describe_group("g1")),
            P("delete group", delete_group("g1")),
            P("describe acls", describe_acls),
            P("create acls", create_acl),
            P("describe log dirs", describe_log_dirs),
            P("cluster authorized operations", cluster_operations),
            P("delete records", delete_records(O)),
            P("offset for leader epoch", offset_for_leader_epoch(O)),
            P("describe producers", describe_producers(O)),
            P("end transaction", end_txn("tx-1")),
        ],
    ),
    Scenario(
        "READ on one topic",
        [Acl(TOPIC, O, READ)],
        [
            P("metadata, all topics", visible_topics),
            P("metadata, the other topic", metadata(PAY)),
            P("produce (READ is not WRITE)", produce(O)),
            P("fetch", fetch(O)),
            P("fetch the other topic", fetch(PAY)),
            P("list offsets", list_offsets(O)),
            P("describe configs (READ is not DESCRIBE_CONFIGS)", describe_configs(2, O)),
            P("offset for leader epoch", offset_for_leader_epoch(O)),
            P("describe producers", describe_producers(O)),
            P("idempotent producer id (READ is not WRITE)", init_producer_id()),
        ],
    ),
    Scenario(
        "WRITE on one topic",
        [Acl(TOPIC, O, WRITE)],
        [
            P("metadata, all topics (WRITE implies DESCRIBE)", visible_topics),
            P("produce", produce(O)),
            P("fetch (WRITE is not READ)", fetch(O)),
            P("idempotent producer id (WRITE on some topic)", init_producer_id()),
        ],
    ),
    Scenario(
        "prefixed READ",
        [Acl(TOPIC, "acl-", READ, pattern=PREFIXED)],
        [
            P("metadata, all topics", visible_topics),
            P("fetch a prefixed topic", fetch(PAY)),
            P("fetch another", fetch(LOGS)),
        ],
    ),
    Scenario(
        "wildcard READ and a DENY READ",
        [Acl(TOPIC, "*", READ), Acl(TOPIC, PAY, READ, DENY)],
        [
            P("metadata, all topics (a DENY READ does not deny DESCRIBE)", visible_topics),
            P("fetch the denied topic", fetch(PAY)),
            P("fetch another", fetch(LOGS)),
        ],
    ),
    Scenario(
        "DENY before ALLOW",
        [Acl(TOPIC, O, ALL), Acl(TOPIC, O, WRITE, DENY)],
        [
            P("produce", produce(O)),
            P("fetch", fetch(O)),
            P("delete records (ALL)", delete_records(O)),
        ],
    ),
    Scenario(
        "the wildcard principal",
        [Acl(TOPIC, O, WRITE, principal="User:*")],
        [
            P("produce", produce(O)),
        ],
    ),
    Scenario(
        "another principal's ACL",
        [Acl(TOPIC, O, ALL, principal="User:alice")],
        [
            P("metadata, all topics", visible_topics),
            P("fetch", fetch(O)),
        ],
    ),
    Scenario(
        "another host",
        [Acl(TOPIC, O, READ, host="10.9.9.9")],
        [
            P("fetch", fetch(O)),
            P("metadata, a named topic", metadata(O)),
        ],
    ),
    Scenario(
        "this host",
        [Acl(TOPIC, O, READ, host="127.0.0.1")],
        [
            P("fetch", fetch(O)),
        ],
    ),
    Scenario(
        "a group",
        [Acl(GROUP, "g-", READ, pattern=PREFIXED), Acl(TOPIC, O, READ)],
        [
            P("find coordinator", find_coordinator("g-1")),
            P("find another group's coordinator", find_coordinator("h-1")),
            P("join group", join_group("g-1")),
            P("offset fetch", offset_fetch("g-1", O)),
            P("offset fetch, a topic not described", offset_fetch("g-1", PAY)),
            P("describe group", describe_group("g-1")),
            P("delete group (READ is not DELETE)", delete_group("g-1")),
        ],
    ),
    Scenario(
        "CREATE on the cluster",
        [Acl(CLUSTER, "kafka-cluster", CREATE), Acl(TOPIC, "acl-new", DESCRIBE, pattern=PREFIXED)],
        [
            P("create topic", create_topic("acl-new-3")),
            P("metadata, auto-creation", metadata("acl-new-4", auto=True)),
        ],
    ),
    Scenario(
        "CREATE on a topic prefix",
        [Acl(TOPIC, "acl-new", CREATE, pattern=PREFIXED)],
        [
            P("create topic", create_topic("acl-new-5")),
            P("create another topic", create_topic("other-5")),
        ],
    ),
    Scenario(
        "ALTER on the cluster",
        [Acl(CLUSTER, "kafka-cluster", ALTER)],
        [
            P("describe acls (ALTER implies DESCRIBE)", describe_acls),
            P("describe log dirs", describe_log_dirs),
            P("cluster authorized operations", cluster_operations),
            P("describe broker configs (ALTER is not DESCRIBE_CONFIGS)", describe_configs(4, "1")),
        ],
    ),
    Scenario(
        "ALTER_CONFIGS",
        [Acl(TOPIC, O, ALTER_CONFIGS), Acl(CLUSTER, "kafka-cluster", ALTER_CONFIGS)],
        [
            P("describe topic configs (implied)", describe_configs(2, O)),
            P("describe broker configs (implied)", describe_configs(4, "1")),
        ],
    ),
    Scenario(
        "IDEMPOTENT_WRITE",
        [Acl(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE)],
        [
            P("idempotent producer id", init_producer_id()),
            P("produce (not WRITE)", produce(O)),
        ],
    ),
    Scenario(
        "a transactional id",
        [Acl(TXN_ID, "tx-", WRITE, pattern=PREFIXED)],
        [
            P("find transaction coordinator (WRITE implies DESCRIBE)", find_coordinator("tx-1", 1)),
            P("find another's coordinator", find_coordinator("ty-1", 1)),
        ],
    ),
    Scenario(
        "DELETE and ALTER on a topic",
        [Acl(TOPIC, LOGS, DELETE), Acl(TOPIC, LOGS, ALTER)],
        [
            P("delete records", delete_records(LOGS)),
            P("create partitions", create_partitions(LOGS)),
            P("metadata, all topics (DELETE implies DESCRIBE)", visible_topics),
        ],
    ),
    Scenario(
        "DENY ALL everywhere",
        [Acl(TOPIC, "*", ALL, DENY), Acl(TOPIC, O, READ)],
        [
            P("fetch", fetch(O)),
            P("metadata, all topics", visible_topics),
        ],
    ),
    *MULTI_PRINCIPAL,
]


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaSide, PydmqSide]]:
    reason = reference_kafka_unavailable()
    if reason:
        pytest.skip(reason)
    kafka = KafkaSide()
    pydmq = PydmqSide(tmp_path_factory.mktemp("acl-diff") / "d")
    try:
        kafka.start()
        pydmq.start()
        for side in (kafka, pydmq):
            side.create_topics(TOPICS)
            _create_coordinator_topics(side)
        yield kafka, pydmq
    finally:
        pydmq.stop()
        kafka.stop()


def _create_coordinator_topics(side: KafkaSide | PydmqSide) -> None:
    """``__consumer_offsets`` and ``__transaction_state`` exist before any scenario, whatever
    the order scenarios run in: Kafka makes them at the first FindCoordinator of each kind
    that is authorized (asked here as the super user), pydmq at start."""
    with RawClient(side.users_bootstrap, timeout=30) as client:
        login(client, "admin")
        for key_type, key in ((0, "warm-up-group"), (1, "warm-up-txn")):
            assert find_coordinator(key, key_type)(client) == 0


def test_the_table_has_at_least_50_cases() -> None:
    assert sum(len(s.probes) for s in SCENARIOS) >= 50


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_same_decisions_as_kafka(sides: tuple[KafkaSide, PydmqSide], scenario: Scenario) -> None:
    observed: dict[str, dict[str, Any]] = {}
    for side in sides:
        side.set_acls(scenario.acls)
        address = side.users_bootstrap if scenario.user else side.bootstrap
        with RawClient(address, timeout=30) as client:
            if scenario.user:
                login(client, scenario.user)
            observed[side.name] = {label: probe(client) for label, probe in scenario.probes}
    differences = {
        label: (observed["kafka"][label], observed["pydmq"][label])
        for label, _ in scenario.probes
        if observed["kafka"][label] != observed["pydmq"][label]
    }
    print(f"\n{scenario.name} (as {scenario.user or 'ANONYMOUS'}): {len(scenario.probes)} cases")
    for label, _ in scenario.probes:
        print(f"  {label}: kafka {observed['kafka'][label]} pydmq {observed['pydmq'][label]}")
    assert not differences, f"{scenario.name}: (kafka, pydmq) differ: {differences}"


def test_unique_names() -> None:
    labels = [(s.name, label) for s in SCENARIOS for label, _ in s.probes]
    assert len(labels) == len(set(labels))
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)
