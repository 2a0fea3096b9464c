"""AlterClientQuotas' checks, with Kafka's error texts (its ClientQuotaControlManager).

Sans-IO. An entity is checked before its values: an empty entity, an entity type other than
user / client-id / ip, an empty name, an ip combined with user or client-id, an ip name that
is neither an address nor a host name; then each value set: a key the entity cannot take, a
value that is not finite, not above 0, fractional or too large for a LONG / INT key. Every
failure is INVALID_REQUEST (42) with Kafka's message.

One difference from Kafka: an ip entity's name is accepted when it is an IP address or a
well-formed host name; Kafka resolves host names (``InetAddress.getByName``), which a
controller operation here must not do (no I/O).
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping, Sequence

from pydmq.quotas.configs import (
    CLIENT_ID,
    IP,
    IP_QUOTA_KEYS,
    USER,
    USER_CLIENT_QUOTA_KEYS,
    QuotaKeyType,
)

__all__ = ["entity_problem", "entity_text", "quota_keys", "value_problem"]

_HOST_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def entity_text(pairs: Sequence[tuple[str, str | None]]) -> str:
    """Kafka's ``ClientQuotaEntity.toString()`` of an entity: ``ClientQuotaEntity(entries=
    {client-id=x, user=y})`` (Java's rendering of a null name: ``null``)."""
    inner = ", ".join(f"{kind}={'null' if name is None else name}" for kind, name in pairs)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def _valid_host(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        labels = (name[:-1] if name.endswith(".") else name).split(".")
        return len(name) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)
    return True


def entity_problem(entity: Mapping[str, str | None]) -> str | None:
    """Why ``entity`` (entity type -> name; None is the default entity) cannot take quotas,
    or None."""
    if not entity:
        return "Invalid empty client quota entity"
    for kind, name in entity.items():
        if kind not in (USER, CLIENT_ID, IP):
            return f"Unhandled client quota entity type: {kind}"
        if name is not None and not name:
            return f"Empty {kind} not supported"
    if IP in entity:
        if USER in entity or CLIENT_ID in entity:
            # Kafka's text, its missing space included.
            return (
                "Invalid quota entity combination, IP entity should"
                "not be combined with User or ClientId"
            )
        name = entity[IP]
        if name is not None and not _valid_host(name):
            return f"{name} is not a valid IP or resolvable host."
    return None


def quota_keys(entity: Mapping[str, str | None]) -> Mapping[str, QuotaKeyType]:
    """The keys a valid ``entity`` takes, with their types."""
    return IP_QUOTA_KEYS if IP in entity else USER_CLIENT_QUOTA_KEYS


def value_problem(keys: Mapping[str, QuotaKeyType], key: str, value: float) -> str | None:
    """Why ``value`` cannot be set for ``key`` of an entity taking ``keys``, or None."""
    kind = keys.get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not math.isfinite(value):
        return f"Quota {key} must be a finite number"
    if value <= 0.0:
        return f"Quota {key} must be greater than 0"
    if kind is QuotaKeyType.DOUBLE:
        return None
    if value > kind.largest:
        return f"Proposed value for {key} is too large for {kind.named}."
    if value - math.floor(value) > 1e-16:
        return f"{key} cannot be a fractional value."
    return None
