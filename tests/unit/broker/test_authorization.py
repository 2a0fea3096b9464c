"""Handlers with an authorizer: the same requests from different principals (issue 19).

An in-process broker with the StandardAuthorizer, ``super.users=User:admin`` and
``allow.everyone.if.no.acl.found=false``. The admin creates topics and ACLs through the ACL
handlers; alice, bob and carol then send requests whose answers follow the ACLs. On cdbc1cf
there is no authorizer (``authorizer.class.name`` is a Kafka property without effect) and
every request is allowed.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.delete_acls import DeleteAclsFilter, DeleteAclsRequest
from pydmq.protocol.messages.describe_acls import DescribeAclsRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pydmq.protocol.messages.list_groups import ListGroupsRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.broker_checks import produce_request
from support.principal_calls import call_as

pytestmark = pytest.mark.timeout(120)

ADMIN, ALICE, BOB, CAROL = "User:admin", "User:alice", "User:bob", "User:carol"
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, CREATE, DESCRIBE, IDEMPOTENT_WRITE = 2, 3, 4, 5, 8, 12
DENY, ALLOW = 2, 3


def acl(
    principal: str,
    op: int,
    rtype: int,
    name: str,
    pattern: int = LITERAL,
    perm: int = ALLOW,
    host: str = "*",
) -> AclCreation:
    return AclCreation(
        resource_type=rtype,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=perm,
    )


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {
        "authorizer.class.name": STANDARD,
        "super.users": ADMIN,
        "allow.everyone.if.no.acl.found": "false",
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("authz") / "d", overrides=overrides) as b:
        created = call_as(
            b,
            ADMIN,
            19,
            7,
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                    for n in ("orders", "payments", "app-logs")
                ],
                timeout=10_000,
            ),
        )
        assert [t.error_code for t in created.topics] == [0, 0, 0]
        answer = call_as(
            b,
            ADMIN,
            30,
            3,
            CreateAclsRequest(
                creations=[
                    acl(ALICE, READ, TOPIC, "orders"),
                    acl(ALICE, WRITE, TOPIC, "orders"),
                    acl(ALICE, READ, GROUP, "team-", PREFIXED),
                    acl(BOB, ALL, TOPIC, "app-", PREFIXED),
                    acl(BOB, WRITE, TOPIC, "app-logs", perm=DENY),
                    acl("User:*", DESCRIBE, TOPIC, "payments"),
                    acl(CAROL, READ, TOPIC, "orders", host="10.1.1.1"),
                ]
            ),
        )
        assert [r.error_code for r in answer.results] == [0] * 7
        yield b


def _metadata(b: EmbeddedBroker, who: str, names: list[str] | None) -> dict[str, int]:
    request = MetadataRequest(
        topics=None if names is None else [MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=True,
    )
    answer = call_as(b, who, 3, 12, request)
    return {t.name: t.error_code for t in answer.topics}


def _produce(b: EmbeddedBroker, who: str, topic: str, transactional_id: str | None = None) -> int:
    request = produce_request(topic, build_batch([SimpleRecord(b"k", b"v")]))
    request.transactional_id = transactional_id
    answer = call_as(b, who, 0, 9, request)
    return int(answer.responses[0].partition_responses[0].error_code)


def _fetch(b: EmbeddedBroker, who: str, topic: str, host: str = "127.0.0.1") -> int:
    request = FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                ],
            )
        ],
    )
    answer: Any = call_as(b, who, 1, 12, request, host=host)
    return int(answer.responses[0].partitions[0].error_code)


def test_metadata_shows_only_described_topics(broker: EmbeddedBroker) -> None:
    assert set(_metadata(broker, ALICE, None)) == {"orders", "payments"}
    assert set(_metadata(broker, BOB, None)) == {"app-logs", "payments"}
    assert set(_metadata(broker, CAROL, None)) == {"payments"}  # from another host
    assert set(_metadata(broker, ADMIN, None)) >= {"orders", "payments", "app-logs"}


def test_metadata_refuses_named_topics_and_auto_creation(broker: EmbeddedBroker) -> None:
    assert _metadata(broker, ALICE, ["app-logs", "orders"]) == {
        "orders": ErrorCode.NONE,
        "app-logs": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    # bob may do ALL on app-*, CREATE included, but not on the cluster
    new = f"app-{uuid.uuid4().hex[:6]}"
    assert _metadata(broker, BOB, [new]) == {new: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _metadata(broker, BOB, [new]) == {new: ErrorCode.NONE}  # created for him
    other = f"x-{uuid.uuid4().hex[:6]}"
    assert _metadata(broker, ALICE, [other]) == {other: ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_produce_needs_write(broker: EmbeddedBroker) -> None:
    assert _produce(broker, ALICE, "orders") == ErrorCode.NONE
    assert _produce(broker, ALICE, "payments") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _produce(broker, BOB, "app-logs") == ErrorCode.TOPIC_AUTHORIZATION_FAILED  # DENY
    assert _produce(broker, ALICE, "orders", "tx-1") == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )


def test_fetch_needs_read_from_the_right_host(broker: EmbeddedBroker) -> None:
    assert _fetch(broker, ALICE, "orders") == ErrorCode.NONE
    assert _fetch(broker, ALICE, "payments") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _fetch(broker, CAROL, "orders") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _fetch(broker, CAROL, "orders", host="10.1.1.1") == ErrorCode.NONE
    assert _fetch(broker, BOB, "app-logs") == ErrorCode.NONE  # ALL, the DENY is WRITE only


def test_groups_need_their_acls(broker: EmbeddedBroker) -> None:
    def find(who: str, group: str) -> int:
        answer = call_as(
            broker, who, 10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
        )
        return int(answer.coordinators[0].error_code)

    def join(who: str, group: str) -> int:
        request = JoinGroupRequest(
            group_id=group,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id="",
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
        )
        return int(call_as(broker, who, 11, 9, request).error_code)

    assert find(ALICE, "team-a") == ErrorCode.NONE
    assert find(ALICE, "other") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert join(ALICE, "team-a") == ErrorCode.MEMBER_ID_REQUIRED
    assert join(BOB, "team-a") == ErrorCode.GROUP_AUTHORIZATION_FAILED
    listed = call_as(broker, ALICE, 16, 4, ListGroupsRequest())
    assert all(g.group_id.startswith("team-") for g in listed.groups)


def test_idempotent_producer_id_needs_idempotent_write_or_write_on_a_topic(
    broker: EmbeddedBroker,
) -> None:
    def init(who: str, txn: str | None = None) -> int:
        request = InitProducerIdRequest(
            transactional_id=txn, transaction_timeout=60_000, producer_id=-1, producer_epoch=-1
        )
        return int(call_as(broker, who, 22, 4, request).error_code)

    assert init(ALICE) == ErrorCode.NONE  # WRITE on orders
    assert init(CAROL) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert init(ALICE, "tx-1") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_acl_apis_need_alter_or_describe_on_the_cluster(broker: EmbeddedBroker) -> None:
    any_filter = DescribeAclsRequest(
        resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
    )
    assert call_as(broker, ALICE, 29, 3, any_filter).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    created = call_as(
        broker, ALICE, 30, 3, CreateAclsRequest(creations=[acl(ALICE, ALL, TOPIC, "*")])
    )
    assert created.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    described = call_as(broker, ADMIN, 29, 3, any_filter)
    assert described.error_code == ErrorCode.NONE
    assert sum(len(r.acls) for r in described.resources) == 7


def test_created_and_deleted_acls_take_effect_at_once(broker: EmbeddedBroker) -> None:
    grant = acl(CAROL, IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")
    assert (
        call_as(broker, ADMIN, 30, 3, CreateAclsRequest(creations=[grant])).results[0].error_code
        == 0
    )
    init = InitProducerIdRequest(transaction_timeout=60_000, producer_id=-1, producer_epoch=-1)
    assert call_as(broker, CAROL, 22, 4, init).error_code == ErrorCode.NONE
    matching = DeleteAclsFilter(
        resource_type_filter=CLUSTER,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=CAROL,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    deleted = call_as(broker, ADMIN, 31, 3, DeleteAclsRequest(filters=[matching]))
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
    assert call_as(broker, CAROL, 22, 4, init).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_invalid_bindings_are_refused(broker: EmbeddedBroker) -> None:
    bad = [
        acl(ALICE, READ, CLUSTER, "not-the-cluster"),
        acl(ALICE, READ, TOPIC, ""),
        acl("alice", READ, TOPIC, "t"),
        acl(ALICE, 1, TOPIC, "t"),  # ANY
        acl(ALICE, READ, TOPIC, "t", pattern=2),  # MATCH
        acl(ALICE, READ, 1, "t"),  # resource type ANY
    ]
    answer = call_as(broker, ADMIN, 30, 3, CreateAclsRequest(creations=bad))
    assert [r.error_code for r in answer.results] == [ErrorCode.INVALID_REQUEST] * len(bad)


def test_without_an_authorizer_the_acl_apis_are_disabled(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as b:
        answer = call_as(
            b, ALICE, 30, 3, CreateAclsRequest(creations=[acl(ALICE, READ, TOPIC, "t")])
        )
        assert answer.results[0].error_code == ErrorCode.SECURITY_DISABLED
        any_filter = DescribeAclsRequest(
            resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1
        )
        assert call_as(b, ALICE, 29, 3, any_filter).error_code == ErrorCode.SECURITY_DISABLED
        assert set(_metadata(b, ALICE, None)) == set()  # nothing hidden: there is nothing yet
        assert _produce(b, ALICE, "anything") in (
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )


def test_authorized_operations_are_the_principals(broker: EmbeddedBroker) -> None:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name="orders")],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )
    (topic,) = call_as(broker, ALICE, 3, 12, request).topics
    assert topic.topic_authorized_operations == (1 << READ) | (1 << WRITE) | (1 << DESCRIBE)
