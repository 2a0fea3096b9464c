"""SCRAM credentials as the cluster metadata keeps them (UserScramCredentialRecord in the
:class:`~pydmq.metadata.image.MetadataImage`), seen by the SCRAM servers and made from what
AlterUserScramCredentials carries (a salt and the salted password, computed by the client).
Pure functions over images."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pydmq.metadata.image import ScramCredentialData
from pydmq.security.sasl.scram import (
    ScramCredential,
    ScramCredentialLookup,
    ScramMechanism,
    salted_password,
)

__all__ = [
    "CredentialMap",
    "ScramSeed",
    "credential_data",
    "credential_from_salted_password",
    "image_scram_lookup",
    "parse_add_scram",
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


@dataclass(frozen=True, slots=True)
class ScramSeed:
    """One ``--add-scram`` credential: the user, the mechanism's type id and the credential."""

    user: str
    mechanism: int
    credential: ScramCredentialData


_ADD_SCRAM = re.compile(r"^(?P<mechanism>[A-Z0-9-]+)=\[(?P<pairs>.*)\]$")
_PAIR = re.compile(r'\s*(?P<key>[a-z]+)=(?:"(?P<quoted>[^"]*)"|(?P<plain>[^,]*))\s*(?:,|$)')


def parse_add_scram(text: str) -> ScramSeed:
    """Kafka's ``kafka-storage.sh format --add-scram`` syntax:
    ``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (values may be double-quoted;
    ``iterations`` (default 4096) and ``salt`` (base64) are optional).
    ValueError on anything else."""
    match = _ADD_SCRAM.match(text.strip())
    mechanism = None if match is None else ScramMechanism.by_name(match["mechanism"])
    if match is None or mechanism is None:
        raise ValueError(
            f"--add-scram {text!r}: expected SCRAM-SHA-256=[name=...,password=...] "
            "(or SCRAM-SHA-512)"
        )
    pairs: dict[str, str] = {}
    pos, body = 0, match["pairs"]
    while pos < len(body):
        item = _PAIR.match(body, pos)
        if item is None or item.end() == pos:
            raise ValueError(f"--add-scram {text!r}: cannot read {body[pos:]!r}")
        pairs[item["key"]] = item["quoted"] if item["quoted"] is not None else item["plain"]
        pos = item.end()
    if not pairs.get("name") or "password" not in pairs:
        raise ValueError(f"--add-scram {text!r}: name and password are required")
    iterations = int(pairs.get("iterations", mechanism.min_iterations))
    if not mechanism.min_iterations <= iterations <= 16384:
        raise ValueError(f"--add-scram {text!r}: iterations must be 4096 to 16384")
    salt = base64.b64decode(pairs["salt"]) if "salt" in pairs else os.urandom(32)
    return ScramSeed(
        pairs["name"],
        mechanism.type_id,
        credential_data(mechanism, pairs["password"], salt, iterations),
    )
