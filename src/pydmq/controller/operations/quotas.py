"""AlterClientQuotas as a controller operation: ClientQuotaRecords for the accepted entities.

Sans-IO. Each entry of the request is one entity and its edits (key -> value, or None to
remove). Kafka's rules (its ClientQuotaControlManager, checked against Kafka 4.4 by
tests/interop/test_quotas_differential.py):

- an entity named twice in one request is answered once, INVALID_REQUEST "Ignoring duplicate
  entity ...", and only its first entry is applied (Kafka keeps the first and answers the
  duplicate's error in its place); an entry naming a key twice is answered the same way and
  changes nothing;
- an entity or value refused by :mod:`pydmq.quotas.validation` is INVALID_REQUEST with
  Kafka's text, and none of that entity's edits is applied (the other entities' are);
- a removal of a key that is not set writes nothing (and is not checked), nor does setting
  the value a key already has; ``validate_only`` checks and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.controller.operations.common import ControllerResult
from pydmq.metadata.image import MetadataImage, QuotaEntity, quota_entity
from pydmq.metadata.records import ClientQuotaRecord, EntityData, MetadataRecord
from pydmq.protocol.errors import ErrorCode
from pydmq.quotas.validation import entity_problem, entity_text, quota_keys, value_problem

__all__ = ["ClientQuotaAlteration", "ClientQuotaAlterationResult", "alter_client_quotas"]


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """One entry of AlterClientQuotas: the entity as sent, and its edits in request order
    (``(key, value)``; value None removes the key)."""

    entity: Sequence[tuple[str, str | None]]
    ops: Sequence[tuple[str, float | None]]


@dataclass(frozen=True, slots=True)
class ClientQuotaAlterationResult:
    """The answer for one entity: its pairs (one per entity type, the last one sent), the
    error code and message."""

    entity: QuotaEntity
    error_code: int
    error_message: str | None


def alter_client_quotas(
    image: MetadataImage,
    alterations: Sequence[ClientQuotaAlteration],
    *,
    validate_only: bool = False,
) -> ControllerResult[list[ClientQuotaAlterationResult]]:
    """The records of the accepted alterations (none when ``validate_only``) and one result
    per distinct entity, in request order; see the module docstring."""
    by_entity: dict[QuotaEntity, list[ClientQuotaAlteration]] = {}
    for alteration in alterations:
        entity = quota_entity(dict(alteration.entity).items())
        by_entity.setdefault(entity, []).append(alteration)
    records: list[MetadataRecord] = []
    results: list[ClientQuotaAlterationResult] = []
    for entity, entries in by_entity.items():
        keys = [key for key, _ in entries[0].ops]
        duplicate = len(set(keys)) != len(keys)
        problem, entity_records = (
            (None, []) if duplicate else _entity_records(image, entity, entries[0].ops)
        )
        if duplicate or len(entries) > 1:
            message = f"Ignoring duplicate entity {entity_text(entity)}"
            results.append(ClientQuotaAlterationResult(entity, ErrorCode.INVALID_REQUEST, message))
            if problem is None and not validate_only:
                records.extend(entity_records)
            continue
        if problem is not None:
            results.append(ClientQuotaAlterationResult(entity, ErrorCode.INVALID_REQUEST, problem))
            continue
        results.append(ClientQuotaAlterationResult(entity, ErrorCode.NONE, None))
        if not validate_only:
            records.extend(entity_records)
    return ControllerResult(records, results)


def _entity_records(
    image: MetadataImage, entity: QuotaEntity, ops: Sequence[tuple[str, float | None]]
) -> tuple[str | None, list[MetadataRecord]]:
    """(problem, records) of one entity's edits: the first problem found, else its records."""
    names = dict(entity)
    problem = entity_problem(names)
    if problem is not None:
        return problem, []
    keys = quota_keys(names)
    current = image.client_quotas.get(entity, {})
    entity_data = tuple(EntityData(kind, name) for kind, name in entity)
    records: list[MetadataRecord] = []
    for key, value in ops:
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity_data, key, 0.0, True))
            continue
        problem = value_problem(keys, key, value)
        if problem is not None:
            return problem, []
        if current.get(key) != value:
            records.append(ClientQuotaRecord(entity_data, key, value, False))
    return None, records
