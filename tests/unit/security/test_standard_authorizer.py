"""The StandardAuthorizer's decision rules, as a table (Kafka's StandardAuthorizerData).

Each row: the ACLs in force, who asks (principal, host), what (operation on a LITERAL
resource), and the decision. ``super.users`` and ``allow.everyone.if.no.acl.found`` vary per
row.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.plugins.host import PluginHost
from pydmq.protocol.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.security.authorizer import build_authorizer
from pydmq.security.principal import KafkaPrincipal
from pydmq.security.standard_authorizer import (
    STANDARD_AUTHORIZER,
    StandardAuthorizer,
    parse_super_users,
)

pytestmark = pytest.mark.timeout(30)

Op = AclOperation
T = ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    principal: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    name: str = "orders",
    pattern: PatternType = LIT,
    rtype: ResourceType = T.TOPIC,
    host: str = "*",
) -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


class Row(NamedTuple):
    why: str
    acls: list[StandardAcl]
    principal: str
    op: AclOperation
    name: str
    allowed: bool
    rtype: ResourceType = T.TOPIC
    host: str = "10.0.0.1"
    super_users: str = ""
    allow_if_none: bool = False


ALICE, BOB = "User:alice", "User:bob"

TABLE = [
    Row("no ACL at all: denied by default", [], ALICE, Op.READ, "orders", False),
    Row(
        "no ACL, allow.everyone.if.no.acl.found",
        [],
        ALICE,
        Op.READ,
        "orders",
        True,
        allow_if_none=True,
    ),
    Row("literal allow", [acl(ALICE, Op.READ)], ALICE, Op.READ, "orders", True),
    Row("literal allow, another principal", [acl(BOB, Op.READ)], ALICE, Op.READ, "orders", False),
    Row(
        "another principal's ACL counts as an ACL of the resource",
        [acl(BOB, Op.READ)],
        ALICE,
        Op.READ,
        "orders",
        False,
        allow_if_none=True,
    ),
    Row(
        "ACLs of another resource only: the default decides",
        [acl(BOB, Op.READ, name="payments")],
        ALICE,
        Op.READ,
        "orders",
        True,
        allow_if_none=True,
    ),
    Row("literal allow, another topic", [acl(ALICE, Op.READ)], ALICE, Op.READ, "order", False),
    Row("literal allow, other operation", [acl(ALICE, Op.WRITE)], ALICE, Op.READ, "orders", False),
    Row("ALL allows everything", [acl(ALICE, Op.ALL)], ALICE, Op.ALTER_CONFIGS, "orders", True),
    Row(
        "deny before allow",
        [acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row(
        "deny ALL beats allow READ",
        [acl(ALICE, Op.READ), acl(ALICE, Op.ALL, DENY)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row(
        "deny WRITE leaves READ",
        [acl(ALICE, Op.READ), acl(ALICE, Op.WRITE, DENY)],
        ALICE,
        Op.READ,
        "orders",
        True,
    ),
    Row(
        "prefixed allow",
        [acl(ALICE, Op.READ, name="ord", pattern=PRE)],
        ALICE,
        Op.READ,
        "orders",
        True,
    ),
    Row(
        "prefixed allow, name shorter than the prefix",
        [acl(ALICE, Op.READ, name="orders-eu", pattern=PRE)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row(
        "prefixed deny beats literal allow",
        [acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, name="or", pattern=PRE)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row(
        "literal name that is a prefix is not a prefix ACL",
        [acl(ALICE, Op.READ, name="ord")],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row("wildcard resource", [acl(ALICE, Op.READ, name="*")], ALICE, Op.READ, "anything", True),
    Row(
        "wildcard deny beats literal allow",
        [acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, name="*")],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row(
        "prefixed '*' is not the wildcard",
        [acl(ALICE, Op.READ, name="*", pattern=PRE)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row("wildcard principal", [acl("User:*", Op.READ)], ALICE, Op.READ, "orders", True),
    Row(
        "wildcard principal deny",
        [acl(ALICE, Op.READ), acl("User:*", Op.READ, DENY)],
        ALICE,
        Op.READ,
        "orders",
        False,
    ),
    Row("host match", [acl(ALICE, Op.READ, host="10.0.0.1")], ALICE, Op.READ, "orders", True),
    Row("host mismatch", [acl(ALICE, Op.READ, host="10.0.0.2")], ALICE, Op.READ, "orders", False),
    Row(
        "deny from another host only",
        [acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY, host="10.0.0.2")],
        ALICE,
        Op.READ,
        "orders",
        True,
    ),
    Row("READ implies DESCRIBE", [acl(ALICE, Op.READ)], ALICE, Op.DESCRIBE, "orders", True),
    Row("WRITE implies DESCRIBE", [acl(ALICE, Op.WRITE)], ALICE, Op.DESCRIBE, "orders", True),
    Row("DELETE implies DESCRIBE", [acl(ALICE, Op.DELETE)], ALICE, Op.DESCRIBE, "orders", True),
    Row("ALTER implies DESCRIBE", [acl(ALICE, Op.ALTER)], ALICE, Op.DESCRIBE, "orders", True),
    Row(
        "CREATE does not imply DESCRIBE",
        [acl(ALICE, Op.CREATE)],
        ALICE,
        Op.DESCRIBE,
        "orders",
        False,
    ),
    Row(
        "ALTER_CONFIGS implies DESCRIBE_CONFIGS",
        [acl(ALICE, Op.ALTER_CONFIGS)],
        ALICE,
        Op.DESCRIBE_CONFIGS,
        "orders",
        True,
    ),
    Row("DESCRIBE does not imply READ", [acl(ALICE, Op.DESCRIBE)], ALICE, Op.READ, "orders", False),
    Row(
        "a DENY of READ does not deny DESCRIBE",
        [acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.READ, DENY)],
        ALICE,
        Op.DESCRIBE,
        "orders",
        True,
    ),
    Row(
        "super user",
        [acl(ALICE, Op.READ, DENY)],
        ALICE,
        Op.READ,
        "orders",
        True,
        super_users="User:admin; User:alice",
    ),
    Row(
        "super users are exact principals",
        [],
        "User:alice2",
        Op.READ,
        "orders",
        False,
        super_users="User:alice",
    ),
    Row(
        "group resource",
        [acl(ALICE, Op.READ, name="g1", rtype=T.GROUP)],
        ALICE,
        Op.READ,
        "g1",
        True,
        rtype=T.GROUP,
    ),
    Row(
        "a topic ACL does not open a group of the same name",
        [acl(ALICE, Op.READ)],
        ALICE,
        Op.READ,
        "orders",
        False,
        rtype=T.GROUP,
    ),
    Row(
        "cluster resource",
        [acl(ALICE, Op.IDEMPOTENT_WRITE, name="kafka-cluster", rtype=T.CLUSTER)],
        ALICE,
        Op.IDEMPOTENT_WRITE,
        "kafka-cluster",
        True,
        rtype=T.CLUSTER,
    ),
    Row(
        "transactional id prefix",
        [acl(ALICE, Op.WRITE, name="tx-", pattern=PRE, rtype=T.TRANSACTIONAL_ID)],
        ALICE,
        Op.WRITE,
        "tx-1",
        True,
        rtype=T.TRANSACTIONAL_ID,
    ),
    Row("another principal type", [acl(ALICE, Op.READ)], "Group:alice", Op.READ, "orders", False),
    Row(
        "User:* also matches another principal type",
        [acl("User:*", Op.READ)],
        "Group:alice",
        Op.READ,
        "orders",
        True,
    ),
]


@pytest.mark.parametrize("row", TABLE, ids=[r.why for r in TABLE])
def test_decision(row: Row) -> None:
    authorizer = StandardAuthorizer(parse_super_users(row.super_users), row.allow_if_none)
    authorizer.update_acls({uuid.uuid4(): a for a in row.acls})
    principal = KafkaPrincipal.parse(row.principal)
    decision = authorizer.authorize(principal, row.host, row.op, row.rtype, row.name)
    assert decision is row.allowed
    # the cached decision is the same
    assert authorizer.authorize(principal, row.host, row.op, row.rtype, row.name) is row.allowed


def test_a_change_of_acls_drops_cached_decisions() -> None:
    authorizer = StandardAuthorizer(frozenset(), False)
    alice = KafkaPrincipal.parse(ALICE)
    assert not authorizer.authorize(alice, "h", Op.READ, T.TOPIC, "orders")
    grant = {uuid.uuid4(): acl(ALICE, Op.READ)}
    authorizer.update_acls(grant)
    assert authorizer.authorize(alice, "h", Op.READ, T.TOPIC, "orders")
    authorizer.update_acls({})
    assert not authorizer.authorize(alice, "h", Op.READ, T.TOPIC, "orders")


BY_TYPE = [
    ("no ACL", [], False),
    ("an ALLOW on one topic", [acl(ALICE, Op.WRITE)], True),
    (
        "an ALLOW shadowed by a literal DENY",
        [acl(ALICE, Op.WRITE), acl(ALICE, Op.WRITE, DENY)],
        False,
    ),
    (
        "an ALLOW shadowed by a prefixed DENY",
        [acl(ALICE, Op.WRITE), acl(ALICE, Op.WRITE, DENY, name="or", pattern=PRE)],
        False,
    ),
    (
        "a wildcard DENY",
        [acl(ALICE, Op.WRITE, name="t2"), acl(ALICE, Op.ALL, DENY, name="*")],
        False,
    ),
    ("a prefixed ALLOW", [acl(ALICE, Op.WRITE, name="ord", pattern=PRE)], True),
    ("ALLOW of another operation", [acl(ALICE, Op.READ)], False),
    ("the wildcard principal", [acl("User:*", Op.WRITE)], True),
]


@pytest.mark.parametrize(("why", "acls", "allowed"), BY_TYPE, ids=[r[0] for r in BY_TYPE])
def test_authorize_by_resource_type(why: str, acls: list[StandardAcl], allowed: bool) -> None:
    authorizer = StandardAuthorizer(frozenset(), False)
    authorizer.update_acls({uuid.uuid4(): a for a in acls})
    alice = KafkaPrincipal.parse(ALICE)
    assert authorizer.authorize_by_resource_type(alice, "h", Op.WRITE, T.TOPIC) is allowed


def test_authorizer_class_name_selects_the_builtin() -> None:
    host = PluginHost(load_entry_points=False)
    assert build_authorizer(BrokerConfig({}), host.authorizers()) is None
    built = build_authorizer(
        BrokerConfig(
            {
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:admin;User:broker",
                "allow.everyone.if.no.acl.found": "true",
            }
        ),
        host.authorizers(),
    )
    assert isinstance(built, StandardAuthorizer)
    assert built.super_users == {"User:admin", "User:broker"}
    assert built.allow_if_no_acl_found
    with pytest.raises(ValueError, match="not registered"):
        build_authorizer(
            BrokerConfig({"authorizer.class.name": "com.example.Nope"}), host.authorizers()
        )
