"""ACL operations: CreateAcls and DeleteAcls as records, as Kafka's AclControlManager.

- :func:`create_acls`: each binding is checked (:func:`~pydmq.security.acl_filter.new_acl_problem`,
  INVALID_REQUEST with Kafka's text); a valid one not already in the image (nor earlier in
  the same request) becomes an AccessControlEntryRecord under a new id; an existing one is
  answered success without a record (ACLs are a set).
- :func:`delete_acls`: each filter is checked (:func:`~pydmq.security.acl_filter.filter_problem`)
  and every ACL it matches gets a RemoveAccessControlEntryRecord (once, when several filters
  match it) and is listed in that filter's result. All of one request commit together.

Sans-IO: image in, records and answers out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydmq.controller.operations.common import ControllerResult
from pydmq.metadata.image import MetadataImage, acl_record
from pydmq.metadata.records import MetadataRecord, RemoveAccessControlEntryRecord
from pydmq.protocol.acl import StandardAcl
from pydmq.protocol.errors import ErrorCode
from pydmq.security.acl_filter import AclBindingFilter, filter_problem, new_acl_problem

__all__ = ["AclCreationResult", "AclDeletionResult", "create_acls", "delete_acls"]


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    """The answer to one binding of a CreateAcls request."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    """The answer to one filter of a DeleteAcls request: the ACLs it deleted."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    deleted: list[StandardAcl] = field(default_factory=list)


def create_acls(
    image: MetadataImage,
    bindings: Sequence[StandardAcl],
    new_id: Callable[[], uuid.UUID] = uuid.uuid4,
) -> ControllerResult[list[AclCreationResult]]:
    existing = set(image.acls.values())
    records: list[MetadataRecord] = []
    results: list[AclCreationResult] = []
    for acl in bindings:
        problem = new_acl_problem(acl)
        if problem is not None:
            results.append(AclCreationResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        if acl not in existing:
            existing.add(acl)
            acl_id = new_id()
            while acl_id in image.acls:
                acl_id = new_id()
            records.append(acl_record(acl_id, acl))
        results.append(AclCreationResult())
    return ControllerResult(records, results)


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> ControllerResult[list[AclDeletionResult]]:
    removed: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[AclDeletionResult] = []
    for flt in filters:
        problem = filter_problem(flt)
        if problem is not None:
            results.append(AclDeletionResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        deleted: list[StandardAcl] = []
        for acl_id, acl in image.acls.items():
            if not flt.matches(acl):
                continue
            deleted.append(acl)
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(acl_id))
        results.append(AclDeletionResult(deleted=deleted))
    return ControllerResult(records, results)
