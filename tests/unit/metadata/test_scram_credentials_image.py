"""SCRAM credentials replay into the image, are removed, and survive a snapshot."""

from __future__ import annotations

import pytest

from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage, ScramCredentialData
from pydmq.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord

pytestmark = pytest.mark.timeout(30)


def replay(image: MetadataImage, *records: object) -> MetadataImage:
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)  # type: ignore[arg-type]
    return delta.apply(offset=image.offset + len(records), epoch=1)


def test_set_replace_remove_and_snapshot() -> None:
    image = replay(
        MetadataImage.EMPTY,
        UserScramCredentialRecord("alice", 1, b"s1", b"k1", b"v1", 4096),
        UserScramCredentialRecord("alice", 2, b"s2", b"k2", b"v2", 8192),
    )
    assert image.scram_credentials[("alice", 1)] == ScramCredentialData(b"s1", b"k1", b"v1", 4096)
    image = replay(
        image,
        UserScramCredentialRecord("alice", 1, b"s3", b"k3", b"v3", 5000),
        RemoveUserScramCredentialRecord("alice", 2),
    )
    assert dict(image.scram_credentials) == {
        ("alice", 1): ScramCredentialData(b"s3", b"k3", b"v3", 5000)
    }
    rebuilt = replay(MetadataImage.EMPTY, *image.to_records())
    assert dict(rebuilt.scram_credentials) == dict(image.scram_credentials)


def test_untouched_credentials_are_shared() -> None:
    image = replay(MetadataImage.EMPTY, UserScramCredentialRecord("a", 1, b"s", b"k", b"v", 4096))
    delta = MetadataDelta(image)
    assert not delta.scram_credentials_changed()
    assert delta.apply(offset=9, epoch=1).scram_credentials is image.scram_credentials
