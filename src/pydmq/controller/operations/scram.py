"""AlterUserScramCredentials as a controller operation: SCRAM credentials become
UserScramCredentialRecord / RemoveUserScramCredentialRecord in the metadata log, on a single
node's local log and a cluster's Raft log alike.

Kafka's rules, per user (a user's alterations all apply or none does): an empty name ->
UNACCEPTABLE_CREDENTIAL; an unknown mechanism -> UNSUPPORTED_SASL_MECHANISM; fewer than 4,096
or more than 16,384 iterations -> UNACCEPTABLE_CREDENTIAL; one (user, mechanism) altered twice
in the request -> DUPLICATE_RESOURCE; deleting a credential that does not exist ->
RESOURCE_NOT_FOUND. The server keys are derived here from the salted password the client
sent (the password itself never reaches the node). Sans-IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydmq.controller.operations.common import ControllerResult
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.security.sasl.credentials import credential_from_salted_password
from pydmq.security.sasl.scram import MAX_ITERATIONS, ScramMechanism

__all__ = [
    "ScramDeletion",
    "ScramUpsertion",
    "UserScramResult",
    "alter_user_scram_credentials",
]


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserScramResult:
    user: str
    error_code: ErrorCode
    error_message: str | None = None


def _problem(
    image: MetadataImage, alteration: ScramDeletion | ScramUpsertion, seen: set[tuple[str, int]]
) -> tuple[ErrorCode, str] | None:
    if not alteration.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = ScramMechanism.by_type(alteration.mechanism)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    key = (alteration.name, alteration.mechanism)
    if key in seen:
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    seen.add(key)
    if isinstance(alteration, ScramDeletion):
        if key not in image.scram_credentials:
            return (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return None
    if alteration.iterations < mechanism.min_iterations:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if alteration.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not alteration.salt or not alteration.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt and salted password must be set"
    return None


def _records(alteration: ScramDeletion | ScramUpsertion) -> MetadataRecord:
    if isinstance(alteration, ScramDeletion):
        return RemoveUserScramCredentialRecord(name=alteration.name, mechanism=alteration.mechanism)
    mechanism = ScramMechanism.by_type(alteration.mechanism)
    assert mechanism is not None
    data = credential_from_salted_password(
        mechanism, alteration.salt, alteration.salted_password, alteration.iterations
    )
    return data.to_record(alteration.name, alteration.mechanism)


def alter_user_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> ControllerResult[list[UserScramResult]]:
    """One result per user named (in order of first appearance) and the records of the users
    whose every alteration is valid."""
    alterations: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
    users: dict[str, tuple[ErrorCode, str] | None] = {}
    seen: set[tuple[str, int]] = set()
    for alteration in alterations:
        problem = _problem(image, alteration, seen)
        if users.get(alteration.name) is None:
            users[alteration.name] = problem
    records = [_records(a) for a in alterations if users[a.name] is None]
    results = [
        UserScramResult(user, ErrorCode.NONE)
        if problem is None
        else UserScramResult(user, problem[0], problem[1])
        for user, problem in users.items()
    ]
    return ControllerResult(records, results)
