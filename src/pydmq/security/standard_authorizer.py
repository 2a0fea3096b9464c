"""``StandardAuthorizer``: Kafka's built-in authorizer rules over the metadata image's ACLs.

Registered as ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (Kafka's class
name, so a Kafka ``server.properties`` works unchanged). Its rules, as Kafka's
StandardAuthorizerData:

- a principal listed in ``super.users`` (semicolon-separated) is allowed everything;
- the ACLs that apply to a LITERAL resource are the LITERAL ones of its exact name, the
  LITERAL wildcard ``*`` of its type, and the PREFIXED ones whose prefix starts its name;
- of those, an ACL counts when its principal is the request's or ``User:*``, its host the
  client's address or ``*``, and its operation the requested one or ALL; an ALLOW ACL of
  READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one of ALTER_CONFIGS also allows
  DESCRIBE_CONFIGS (a DENY implies nothing);
- any counting DENY denies (DENY before ALLOW), else any counting ALLOW allows, else the
  request is denied when some ACL applies to the resource (for another principal, host or
  operation) and decided by ``allow.everyone.if.no.acl.found`` (default false) when none does.

Decisions are cached per (principal, host, operation, resource type, resource name), so the
Produce and Fetch paths pay one dict lookup per topic; the cache is dropped whenever the ACLs
change (:meth:`StandardAuthorizer.update_acls`) and when it grows past
:data:`CACHE_LIMIT` entries.

Owned by the broker; called on the event loop only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Final
from uuid import UUID

from pydmq.protocol.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from pydmq.security.authorizer import AuthorizerSpec
from pydmq.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig

__all__ = [
    "CACHE_LIMIT",
    "STANDARD_AUTHORIZER",
    "STANDARD_AUTHORIZER_SPEC",
    "StandardAuthorizer",
    "parse_super_users",
]

STANDARD_AUTHORIZER: Final = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

CACHE_LIMIT: Final = 100_000
"""Cached decisions kept at most; past it the cache starts again empty."""

_IMPLIES_DESCRIBE: Final = frozenset(
    (
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    )
)
_IMPLIES_DESCRIBE_CONFIGS: Final = frozenset(
    (AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
)

_DecisionKey = tuple[str, str, str, AclOperation, ResourceType, str]


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons, blanks ignored."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def _acl_result(
    acl: StandardAcl, principals: tuple[str, str], host: str, operation: AclOperation
) -> AclPermissionType | None:
    """ALLOW or DENY when ``acl`` counts for this request, None when it does not."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission_type


class _AclIndex:
    """The ACLs of one resource type: LITERAL ones by name, PREFIXED ones as a list."""

    __slots__ = ("literal", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, list[StandardAcl]] = {}
        self.prefixed: list[StandardAcl] = []

    def applicable(self, name: str) -> Iterator[StandardAcl]:
        """The ACLs that apply to the LITERAL resource ``name``."""
        yield from self.literal.get(name, ())
        if name != WILDCARD:
            yield from self.literal.get(WILDCARD, ())
        for acl in self.prefixed:
            if name.startswith(acl.resource_name):
                yield acl


class StandardAuthorizer:
    """Kafka's StandardAuthorizer rules (see the module docstring). Owned by the broker; its
    ACLs are replaced by whoever follows the metadata (event loop)."""

    def __init__(self, super_users: frozenset[str], allow_if_no_acl_found: bool) -> None:
        self.super_users = super_users
        self.allow_if_no_acl_found = allow_if_no_acl_found
        self._acls: Mapping[UUID, StandardAcl] = {}
        self._index: dict[ResourceType, _AclIndex] = {}
        self._cache: dict[_DecisionKey, bool] = {}

    @classmethod
    def from_config(cls, config: BrokerConfig) -> StandardAuthorizer:
        return cls(
            parse_super_users(config.get_str("super.users")),
            config.get_bool("allow.everyone.if.no.acl.found"),
        )

    # -- the ACLs -------------------------------------------------------------------------

    def update_acls(self, acls: Mapping[UUID, StandardAcl]) -> None:
        index: dict[ResourceType, _AclIndex] = {}
        for acl in acls.values():
            of_type = index.setdefault(acl.resource_type, _AclIndex())
            if acl.pattern_type == PatternType.PREFIXED:
                of_type.prefixed.append(acl)
            else:
                of_type.literal.setdefault(acl.resource_name, []).append(acl)
        self._acls = dict(acls)
        self._index = index
        self._cache = {}

    def acls(self) -> Mapping[UUID, StandardAcl]:
        return self._acls

    # -- decisions ------------------------------------------------------------------------

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        # Flat, of values whose hashes are C-level (a frozen dataclass's is a Python call).
        key = (
            principal.principal_type,
            principal.name,
            host,
            operation,
            resource_type,
            resource_name,
        )
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, resource_name)
            if len(self._cache) >= CACHE_LIMIT:
                self._cache = {}
            self._cache[key] = decision
        return decision

    def _decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        name = str(principal)
        if name in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return self.allow_if_no_acl_found
        principals = (name, WILDCARD_PRINCIPAL)
        found = allowed = False
        for acl in index.applicable(resource_name):
            found = True
            result = _acl_result(acl, principals, host, operation)
            if result == AclPermissionType.DENY:
                return False
            if result == AclPermissionType.ALLOW:
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl_found if not found else False

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: allowed on a resource nobody names
        (super users, ``allow.everyone.if.no.acl.found``), or some ALLOW of this principal
        and operation that no DENY of the same principal and operation shadows."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        principals = (str(principal), WILDCARD_PRINCIPAL)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[StandardAcl] = []
        for acl in self._acls.values():
            if acl.resource_type != resource_type or acl.principal not in principals:
                continue
            if acl.host not in (WILDCARD, host):
                continue
            if acl.operation not in (operation, AclOperation.ALL):
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.resource_name == WILDCARD:
                        return False
                    deny_literal.add(acl.resource_name)
                else:
                    deny_prefixed.add(acl.resource_name)
            else:
                allows.append(acl)
        if any(
            a.pattern_type == PatternType.LITERAL and a.resource_name == WILDCARD for a in allows
        ):
            return True
        for acl in allows:
            if acl.pattern_type == PatternType.LITERAL and acl.resource_name in deny_literal:
                continue
            if any(acl.resource_name.startswith(prefix) for prefix in deny_prefixed):
                continue
            return True
        return False


STANDARD_AUTHORIZER_SPEC: Final = AuthorizerSpec(
    STANDARD_AUTHORIZER, StandardAuthorizer.from_config
)
"""The built-in authorizer's registration (``pydmq_register_authorizers``)."""
