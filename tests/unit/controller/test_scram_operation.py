"""AlterUserScramCredentials as a controller operation: Kafka's per-user checks, and the
records it emits (server keys derived from the salted password)."""

from __future__ import annotations

import pytest

from pydmq.controller.operations.scram import (
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
)
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from pydmq.protocol.errors import ErrorCode
from pydmq.security.sasl.credentials import credential_data
from pydmq.security.sasl.scram import ScramMechanism, salted_password

pytestmark = pytest.mark.timeout(30)

SHA256 = ScramMechanism.SCRAM_SHA_256


def upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> ScramUpsertion:
    salted = salted_password(SHA256, b"pw", b"salt", iterations)
    return ScramUpsertion(name, mechanism, iterations, b"salt", salted)


def image_with_alice() -> MetadataImage:
    result = alter_user_scram_credentials(MetadataImage.EMPTY, [], [upsert("alice")])
    delta = MetadataDelta(MetadataImage.EMPTY)
    for rec in result.records:
        delta.replay(rec)
    return delta.apply(offset=0, epoch=1)


def test_upsertion_stores_the_keys_a_password_login_derives() -> None:
    result = alter_user_scram_credentials(MetadataImage.EMPTY, [], [upsert("alice")])
    assert [(r.user, r.error_code) for r in result.response] == [("alice", ErrorCode.NONE)]
    (record,) = result.records
    assert isinstance(record, UserScramCredentialRecord)
    expected = credential_data(SHA256, "pw", b"salt", 4096)
    assert (record.stored_key, record.server_key) == (expected.stored_key, expected.server_key)


def test_deletion_of_an_existing_credential() -> None:
    result = alter_user_scram_credentials(image_with_alice(), [ScramDeletion("alice", 1)], [])
    assert result.records == [RemoveUserScramCredentialRecord("alice", 1)]
    assert result.response[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize(
    ("deletions", "upsertions", "code"),
    [
        ([], [upsert("")], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("bob", mechanism=3)], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([], [upsert("bob", iterations=4095)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("bob", iterations=16385)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([ScramDeletion("bob", 1)], [], ErrorCode.RESOURCE_NOT_FOUND),
        ([ScramDeletion("bob", 9)], [], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([], [upsert("bob"), upsert("bob")], ErrorCode.DUPLICATE_RESOURCE),
    ],
)
def test_refusals(
    deletions: list[ScramDeletion], upsertions: list[ScramUpsertion], code: ErrorCode
) -> None:
    result = alter_user_scram_credentials(MetadataImage.EMPTY, deletions, upsertions)
    assert [r.error_code for r in result.response] == [code]
    assert result.records == []


def test_a_users_alterations_apply_together_others_are_independent() -> None:
    result = alter_user_scram_credentials(
        image_with_alice(),
        [ScramDeletion("alice", 1), ScramDeletion("carol", 2)],
        [upsert("carol", 1), upsert("dave", 2)],
    )
    codes = {r.user: r.error_code for r in result.response}
    assert codes == {
        "alice": ErrorCode.NONE,
        "carol": ErrorCode.RESOURCE_NOT_FOUND,
        "dave": ErrorCode.NONE,
    }
    assert {(r.name, r.mechanism) for r in result.records} == {("alice", 1), ("dave", 2)}
