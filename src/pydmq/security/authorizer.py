"""The authorizer port: what a request's principal may do, decided from the cluster's ACLs.

An :class:`Authorizer` answers Kafka's two questions, ``authorize`` (this principal, from this
host, this operation on this resource) and ``authorize_by_resource_type`` (on any resource of
a type: the fallback of InitProducerId without IDEMPOTENT_WRITE), and is handed the whole ACL
set each time the metadata image's ACLs change (a single node's local controller, a cluster
broker's UpdateMetadata). Authorizers are registered through ``pydmq_register_authorizers``
as :class:`AuthorizerSpec` objects and selected by ``authorizer.class.name`` (empty: no
authorizer, every request allowed, the ACL APIs answer SECURITY_DISABLED; as Kafka).

The broker resolves one authorizer at start-up and its handlers call it directly (never a
hook per request); every call is on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from pydmq.protocol.acl import AclOperation, ResourceType, StandardAcl
from pydmq.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from pydmq.config.broker import BrokerConfig

__all__ = ["Authorizer", "AuthorizerSpec", "build_authorizer"]


class Authorizer(Protocol):
    """Decides requests against the ACLs it was last given (see the module docstring)."""

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may do ``operation`` on the
        LITERAL resource ``resource_type``/``resource_name``."""
        ...

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Whether ``principal`` may do ``operation`` on at least one resource of
        ``resource_type`` (an ALLOW no DENY shadows)."""
        ...

    def update_acls(self, acls: Mapping[UUID, StandardAcl]) -> None:
        """Replace every ACL by ``acls`` (the metadata image's, by id)."""
        ...

    def acls(self) -> Mapping[UUID, StandardAcl]:
        """The ACLs in force, by id (what DescribeAcls lists)."""
        ...


@dataclass(frozen=True, slots=True)
class AuthorizerSpec:
    """A registered authorizer: ``name`` (what ``authorizer.class.name`` gives) and a
    factory taking the node's configuration."""

    name: str
    factory: Callable[[BrokerConfig], Authorizer]


def build_authorizer(
    config: BrokerConfig, specs: Mapping[str, AuthorizerSpec]
) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` names, None when it is empty; a name no
    plugin registered is a start-up error."""
    name = config.get_str("authorizer.class.name").strip()
    if not name:
        return None
    spec = specs.get(name)
    if spec is None:
        known = ", ".join(sorted(specs)) or "none"
        raise ValueError(f"authorizer.class.name {name!r} is not registered (known: {known})")
    return spec.factory(config)
