"""ACL bindings and binding filters as the ACL APIs carry them, and Kafka's rules for them.

:class:`AclBindingFilter` is what DescribeAcls and DeleteAcls send (``ANY`` codes and null
fields match everything, ``MATCH`` finds the patterns that would apply to one resource name,
as Kafka's ResourcePatternFilter and AccessControlEntryFilter); :func:`new_acl_problem` is
the check a CreateAcls binding must pass before it becomes an ACL (Kafka's
AclControlManager.validateNewAcl and the broker's CLUSTER-name rule), and
:func:`filter_problem` the check of a filter. Codes Kafka does not know decode as UNKNOWN.

Pure functions and values: used by the controller's ACL operations and the broker's
DescribeAcls handler, on the event loop.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeVar

from pydmq.protocol.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)

__all__ = ["AclBindingFilter", "code_of", "filter_problem", "new_acl_problem"]

E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def code_of(enum_type: type[E], code: int) -> E:
    """``code`` as ``enum_type``; a code Kafka does not define is UNKNOWN (0)."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over ACLs: None names and hosts, and ANY codes, match everything."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, acl: StandardAcl) -> bool:
        """Whether ``acl`` passes this filter (Kafka's AclBindingFilter.matches)."""
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: StandardAcl) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        return name.startswith(acl.resource_name)

    def _matches_entry(self, acl: StandardAcl) -> bool:
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )


def filter_problem(flt: AclBindingFilter) -> str | None:
    """Why a Describe/DeleteAcls filter is refused (INVALID_REQUEST), or None."""
    if flt.pattern_type == PatternType.UNKNOWN or flt.resource_type == ResourceType.UNKNOWN:
        return "Unknown patternFilter."
    if flt.operation == AclOperation.UNKNOWN or flt.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None


def _invalid(kind: str, value: enum.IntEnum) -> str:
    return f"Invalid {kind} {value.name}"


def new_acl_problem(acl: StandardAcl) -> str | None:
    """Why a CreateAcls binding cannot become an ACL (INVALID_REQUEST), or None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return _invalid("resourceType", acl.resource_type)
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return _invalid("patternType", acl.pattern_type)
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return _invalid("operation", acl.operation)
    if acl.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return _invalid("permissionType", acl.permission_type)
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    if ":" not in acl.principal:
        return f"Could not parse principal from `{acl.principal}` (no colon is present " + (
            "separating the principal type from the principal name)"
        )
    return None
