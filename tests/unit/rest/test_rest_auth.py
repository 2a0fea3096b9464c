"""HTTP Basic on the REST admin API of a broker whose client listener is SASL: the same
users as Kafka clients (SCRAM credentials, PLAIN's JAAS users) and the same ACLs (the
StandardAuthorizer), against a real ``pydmq serve``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from pydmq.testing.process import BrokerProcess
from support.sasl_broker import PLAIN_JAAS, SaslListenerBroker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, http_ready: Any) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("rest-sasl")
    broker = SaslListenerBroker(
        root / "data",
        "SASL_PLAINTEXT",
        overrides={
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        log_path=root / "broker.log",
    )
    broker.start()
    http_ready(broker)
    yield broker
    broker.stop()


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_basic_authentication(secured: BrokerProcess, client: Any) -> None:
    rest = client(secured.http_port)
    missing = rest.request("GET", "/v1/admin/topics")
    assert missing.status == 401 and missing.error["code"] == "UNAUTHORIZED"
    assert missing.headers["www-authenticate"].startswith("Basic ")
    assert "x-ratelimit-remaining" in missing.headers
    wrong = rest.request("GET", "/v1/admin/topics", headers=_basic("admin", "nope"))
    assert wrong.status == 401 and wrong.error["code"] == "UNAUTHORIZED"
    unknown = rest.request("GET", "/v1/admin/topics", headers=_basic("mallory", "x"))
    assert unknown.status == 401
    garbled = rest.request("GET", "/v1/admin/topics", headers={"Authorization": "Basic %%%"})
    assert garbled.status == 401
    # monitoring stays open (scrapers, probes)
    assert rest.request("GET", "/v1/health/live").status == 200
    # the SCRAM user (and, with the same password, PLAIN's) is let in
    created = rest.request(
        "POST", "/v1/admin/topics", {"name": "admins"}, _basic("admin", "admin-secret")
    )
    assert created.status == 201, created.body


def test_acls_apply_to_the_basic_user(secured: BrokerProcess, client: Any) -> None:
    rest = client(secured.http_port)
    alice = _basic("alice", "alice-secret")  # a PLAIN user without ACLs
    denied = rest.request("POST", "/v1/admin/topics", {"name": "alice-one"}, alice)
    assert denied.status == 403, denied.body
    assert denied.error["code"] == "FORBIDDEN"
    assert denied.error["details"]["kafka_error"] == "TOPIC_AUTHORIZATION_FAILED"
    listed = rest.request("GET", "/v1/admin/topics", headers=alice)
    assert listed.status == 200 and listed.json["topics"] == []  # Metadata hides them
    quorum = rest.request("GET", "/v1/admin/cluster/quorum", headers=alice)
    assert quorum.status == 403

    admin = AdminClient(
        {
            "bootstrap.servers": secured.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    grants = [
        AclBinding(
            ResourceType.TOPIC,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
    ]
    for future in admin.create_acls(grants).values():
        future.result(30)
    allowed = rest.request("POST", "/v1/admin/topics", {"name": "alice-one"}, alice)
    assert allowed.status == 201, allowed.body
    assert rest.request("POST", "/v1/admin/topics", {"name": "bob-one"}, alice).status == 403
    names = [
        t["name"] for t in rest.request("GET", "/v1/admin/topics", headers=alice).json["topics"]
    ]
    assert names == ["alice-one"]
    described = rest.request("GET", "/v1/admin/topics/alice-one", headers=alice)
    assert described.status == 200, described.body


def test_group_acls_apply_to_the_basic_user(secured: BrokerProcess, client: Any) -> None:
    rest = client(secured.http_port)
    admin = _basic("admin", "admin-secret")
    alice = _basic("alice", "alice-secret")
    assert rest.request("POST", "/v1/admin/topics", {"name": "shared"}, admin).status == 201
    reset = {"topic": "shared", "to": "earliest"}
    done = rest.request("POST", "/v1/admin/groups/team/offsets/reset", reset, admin)
    assert done.status == 200, done.body
    groups = rest.request("GET", "/v1/admin/groups", headers=admin).json["groups"]
    assert "team" in [g["group_id"] for g in groups]
    assert rest.request("GET", "/v1/admin/groups", headers=alice).json["groups"] == []
    denied = rest.request("POST", "/v1/admin/groups/team/offsets/reset", reset, alice)
    assert denied.status == 403, denied.body
    assert denied.error["details"]["kafka_error"] == "GROUP_AUTHORIZATION_FAILED"
    assert rest.request("GET", "/v1/admin/groups/team", headers=alice).status == 403
