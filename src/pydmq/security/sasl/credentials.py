"""SCRAM credentials as the cluster metadata keeps them (UserScramCredentialRecord in the
:class:`~pydmq.metadata.image.MetadataImage`), seen by the SCRAM servers and made from what
AlterUserScramCredentials carries (a salt and the salted password, computed by the client).
Pure functions over images."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydmq.metadata.image import ScramCredentialData
from pydmq.security.sasl.scram import (
    ScramCredential,
    ScramCredentialLookup,
    ScramMechanism,
    salted_password,
)

__all__ = [
    "CredentialMap",
    "credential_data",
    "credential_from_salted_password",
    "image_scram_lookup",
]

# (user name, mechanism type id) -> credential: MetadataImage.scram_credentials.
CredentialMap = Mapping[tuple[str, int], ScramCredentialData]


def image_scram_lookup(current: Callable[[], CredentialMap]) -> ScramCredentialLookup:
    """A lookup over the credentials ``current()`` returns at each authentication (the
    node's latest metadata, so a new or deleted user counts from the next exchange on)."""

    def lookup(mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        data = current().get((user, mechanism.type_id))
        if data is None:
            return None
        return ScramCredential(data.salt, data.stored_key, data.server_key, data.iterations)

    return lookup


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredentialData:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key") (RFC 5802 §3)."""
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredentialData(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def credential_data(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredentialData:
    """The stored form of ``password`` (the CLI's and format's ``--add-scram``)."""
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)
