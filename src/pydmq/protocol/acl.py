"""Kafka's ACL vocabulary: resource, operation, permission and pattern codes, and one ACL.

The codes are Kafka's wire values (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``), used by CreateAcls/DescribeAcls/DeleteAcls, by the
``*_authorized_operations`` bit sets and by the ACL metadata records. :class:`StandardAcl` is
one access-control entry bound to a resource pattern, as Kafka's StandardAcl: what the
metadata image keeps by ACL id and what the authorizer matches requests against.

Sans-IO: values only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLUSTER_NAME",
    "CLUSTER_OPERATIONS",
    "GROUP_OPERATIONS",
    "TOPIC_OPERATIONS",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
    "StandardAcl",
    "operations_bits",
]


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (ANY only in filters; ALL matches every operation)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    """Kafka's AclPermissionType codes (ANY only in filters)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(enum.IntEnum):
    """Kafka's PatternType codes: LITERAL and PREFIXED bind ACLs; ANY and MATCH only filter."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


WILDCARD: Final = "*"
"""A LITERAL resource name or an ACL host matching every name or host."""

WILDCARD_PRINCIPAL: Final = "User:*"
"""The ACL principal matching every principal."""

CLUSTER_NAME: Final = "kafka-cluster"
"""The one CLUSTER resource's name."""


def operations_bits(operations: tuple[AclOperation, ...] | frozenset[AclOperation]) -> int:
    """The ``*_authorized_operations`` bit set of ``operations`` (bit = operation code)."""
    return sum(1 << op for op in set(operations))


TOPIC_OPERATIONS: Final = operations_bits(
    (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    )
)
"""The operations the TOPIC resource supports, as a bit set."""

GROUP_OPERATIONS: Final = operations_bits(
    (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE)
)
"""The operations the GROUP resource supports, as a bit set."""

CLUSTER_OPERATIONS: Final = operations_bits(
    (
        AclOperation.CREATE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
    )
)
"""The operations the CLUSTER resource supports, as a bit set (what a principal allowed
everything is told)."""


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL: an entry (principal, host, operation, permission) on a resource pattern.

    ``principal`` is kept as text (``User:alice``, ``User:*``), as Kafka's StandardAcl.
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType
