"""DescribeClientQuotas' filter over a set of client quotas, with Kafka's rules and texts.

Sans-IO. A filter is a list of components (entity type, match type, match): EXACT (0) matches
the entity of that type named ``match``, DEFAULT (1) the type's default entity, SPECIFIED (2)
any entity of that type. An entity matches when every component matches it; with ``strict``
it must also have no other entity type (so an empty strict filter matches nothing). The
component errors are INVALID_REQUEST (UNSUPPORTED_VERSION for an entity type Kafka does not
know), with Kafka's messages, and an error answers no entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydmq.metadata.image import QuotaEntity
from pydmq.protocol.errors import ErrorCode
from pydmq.quotas.configs import CLIENT_ID, ENTITY_TYPES, IP, USER

__all__ = [
    "MATCH_DEFAULT",
    "MATCH_EXACT",
    "MATCH_SPECIFIED",
    "FilterComponent",
    "QuotaFilterError",
    "describe_client_quotas",
]

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class FilterComponent:
    """One component of a DescribeClientQuotas filter."""

    entity_type: str
    match_type: int
    match: str | None


class QuotaFilterError(ValueError):
    """A filter Kafka refuses: ``error_code`` and its message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _checked(components: Sequence[FilterComponent]) -> dict[str, FilterComponent]:
    by_type: dict[str, FilterComponent] = {}
    for component in components:
        kind = component.entity_type
        if not kind:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if kind in by_type:
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {kind} cannot appear more than once in the filter.",
            )
        if kind not in ENTITY_TYPES:
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        match_type = component.match_type
        if match_type == MATCH_EXACT and component.match is None:
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            )
        if match_type in (MATCH_DEFAULT, MATCH_SPECIFIED) and component.match is not None:
            name = "MATCH_TYPE_DEFAULT" if match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
            raise QuotaFilterError(
                ErrorCode.INVALID_REQUEST,
                f"Request specified {name}, but also specified a match string.",
            )
        if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        by_type[kind] = component
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise QuotaFilterError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return by_type


def _matches(component: FilterComponent, names: Mapping[str, str | None]) -> bool:
    if component.entity_type not in names:
        return False
    name = names[component.entity_type]
    if component.match_type == MATCH_EXACT:
        return name == component.match
    if component.match_type == MATCH_DEFAULT:
        return name is None
    return True


def describe_client_quotas(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[FilterComponent],
    strict: bool,
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities of ``quotas`` the filter matches, with their values; raises
    :class:`QuotaFilterError`."""
    by_type = _checked(components)
    out: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity, values in quotas.items():
        names = dict(entity)
        if strict and set(names) != set(by_type):
            continue
        if all(_matches(c, names) for c in by_type.values()):
            out.append((entity, values))
    return out
