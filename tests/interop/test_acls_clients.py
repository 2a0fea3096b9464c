"""ACLs with real clients (issue 19): the admin clients' ACL calls, and what clients see.

- kafka-python's and confluent-kafka's admin clients create, describe (ANY, MATCH, LITERAL,
  PREFIXED filters) and delete ACLs on a broker where their principal (User:ANONYMOUS over
  PLAINTEXT) is a super user;
- on a broker where User:ANONYMOUS is not a super user, with ACLs set by the admin in process
  (tests/support/principal_calls.py): a confluent-kafka producer's denied write fails with
  TOPIC_AUTHORIZATION_FAILED, a consumer of a denied group with GROUP_AUTHORIZATION_FAILED,
  and Metadata lists only the topics the principal may describe;
- without an authorizer, the admin clients get SECURITY_DISABLED.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType

from pydmq.protocol.messages.create_acls import AclCreation, CreateAclsRequest
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.principal_calls import call_as

pytestmark = pytest.mark.timeout(180)

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT = 15


@pytest.fixture(scope="module")
def open_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """The client's principal (User:ANONYMOUS) is a super user: it manages the ACLs."""
    overrides = {"authorizer.class.name": STANDARD, "super.users": "User:ANONYMOUS"}
    with EmbeddedBroker(tmp_path_factory.mktemp("acl-open") / "d", overrides=overrides) as b:
        yield b


@pytest.fixture(scope="module")
def closed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """User:ANONYMOUS is not a super user; the admin (User:admin) acts in process."""
    overrides = {"authorizer.class.name": STANDARD, "super.users": "User:admin"}
    with EmbeddedBroker(tmp_path_factory.mktemp("acl-closed") / "d", overrides=overrides) as b:
        created = call_as(
            b,
            "User:admin",
            19,
            7,
            CreateTopicsRequest(
                topics=[
                    CreatableTopic(name=n, num_partitions=1, replication_factor=1)
                    for n in ("open-topic", "secret-topic")
                ],
                timeout=10_000,
            ),
        )
        assert [t.error_code for t in created.topics] == [0, 0]

        def allow(rtype: int, name: str, op: int) -> AclCreation:
            return AclCreation(
                resource_type=rtype, resource_name=name, resource_pattern_type=3,
                principal="User:ANONYMOUS", host="*", operation=op, permission_type=3,
            )  # fmt: skip

        acls = [allow(2, "open-topic", 2), allow(3, "open-group", 3)]  # ALL, READ
        answer = call_as(b, "User:admin", 30, 3, CreateAclsRequest(creations=acls))
        assert [r.error_code for r in answer.results] == [0, 0]
        yield b


def _only(futures: dict[Any, Future[Any]]) -> Future[Any]:
    """The one future of an admin call given one binding or filter."""
    (future,) = futures.values()
    return future


def _every() -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip


def test_confluent_admin_creates_describes_and_deletes_acls(open_broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    bindings = [
        AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice",
                   "*", AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:bob",
                   "*", AclOperation.WRITE, AclPermissionType.DENY),
        AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, "User:*",
                   "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW),
    ]  # fmt: skip
    for future in admin.create_acls(bindings).values():
        assert future.result(TIMEOUT) is None
    assert sorted(map(str, admin.describe_acls(_every()).result(TIMEOUT))) == sorted(
        map(str, bindings)
    )
    match = AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert sorted(map(str, admin.describe_acls(match).result(TIMEOUT))) == sorted(
        map(str, bindings[:2])
    )
    prefixed = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.PREFIXED, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert [str(b) for b in admin.describe_acls(prefixed).result(TIMEOUT)] == [str(bindings[1])]
    deleted = _only(admin.delete_acls([match])).result(TIMEOUT)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings[:2]))
    assert [str(b) for b in admin.describe_acls(_every()).result(TIMEOUT)] == [str(bindings[2])]
    _only(admin.delete_acls([_every()])).result(TIMEOUT)
    bad = AclBinding(ResourceType.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL,
                     "User:alice", "*", AclOperation.ALTER, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        _only(admin.create_acls([bad])).result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_kafka_python_admin_creates_describes_and_deletes_acls(
    open_broker: EmbeddedBroker,
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=open_broker.bootstrap)
    try:
        acl = ACL(
            "User:carol", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
            ResourcePattern(KpResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED),
        )  # fmt: skip
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        every = ACLFilter(
            None, None, ACLOperation.ANY, ACLPermissionType.ANY,
            ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
        )  # fmt: skip
        listed, error = admin.describe_acls(every)
        assert error.errno == 0
        assert [(a.principal, a.resource_pattern.resource_name) for a in listed] == [
            ("User:carol", "kp-")
        ]
        results = admin.delete_acls([every])
        assert [len(matched) for _, matched, _ in results] == [1]
        assert admin.describe_acls(every)[0] == []
    finally:
        admin.close()


def test_a_denied_produce_is_topic_authorization_failed(closed_broker: EmbeddedBroker) -> None:
    errors: list[KafkaError] = []
    producer = Producer(
        {"bootstrap.servers": closed_broker.bootstrap, "enable.idempotence": False,
         "message.timeout.ms": 10_000}
    )  # fmt: skip
    producer.produce("open-topic", b"allowed")
    producer.produce("secret-topic", b"denied", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_metadata_hides_topics(closed_broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": closed_broker.bootstrap})
    assert "secret-topic" not in admin.list_topics(timeout=TIMEOUT).topics
    assert "open-topic" in admin.list_topics(timeout=TIMEOUT).topics
    name = f"new-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_denied_group_is_group_authorization_failed(closed_broker: EmbeddedBroker) -> None:
    def first_error(group: str) -> int | None:
        consumer = Consumer(
            {"bootstrap.servers": closed_broker.bootstrap, "group.id": group,
             "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )  # fmt: skip
        try:
            consumer.subscribe(["open-topic"])
            for _ in range(20):
                msg = consumer.poll(0.5)
                if msg is not None and msg.error():
                    return int(msg.error().code())
                if msg is not None:
                    return None
            return None
        finally:
            consumer.close()

    assert first_error("denied-group") == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert first_error("open-group") is None


def test_without_an_authorizer_the_admin_clients_get_security_disabled(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            every = ACLFilter(
                None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
            )  # fmt: skip
            with pytest.raises(Exception, match="SecurityDisabled"):
                admin.describe_acls(every)
        finally:
            admin.close()
        confluent = AdminClient({"bootstrap.servers": b.bootstrap})
        binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a",
                             "*", AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
        with pytest.raises(KafkaException) as refused:
            _only(confluent.create_acls([binding])).result(TIMEOUT)
        assert refused.value.args[0].code() == KafkaError.SECURITY_DISABLED
