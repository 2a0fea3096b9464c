"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka speaks
them: no channel binding (``n,,`` only), user names in SCRAM's ``=2C``/``=3D`` escapes, at
least 4,096 iterations, and credentials kept as (salt, StoredKey, ServerKey, iterations): the
password itself is never stored.

Sans-IO: :class:`ScramSaslServer` is fed the client's messages and returns the server's. A
user without a credential gets a made-up one (a salt derived from the name with a per-process
secret), so the exchange fails at the proof exactly as a wrong password does: neither the
message nor the step tells whether the user exists (RFC 5802 §5.1).
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from pydmq.security.sasl.errors import InvalidCredentialsError

__all__ = [
    "MAX_ITERATIONS",
    "ScramCredential",
    "ScramCredentialLookup",
    "ScramMechanism",
    "ScramSaslServer",
    "client_proof",
    "escape_username",
    "scram_credential",
    "unescape_username",
]

# Kafka's bounds on AlterUserScramCredentials iterations (minimum: RFC 7677's).
MAX_ITERATIONS = 16384
_FAILED = "Authentication failed: Invalid user credentials"
# RFC 5802's grammar, restricted to ASCII as Kafka's ScramMessages is.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_EXTENSIONS = rf"(?:,[a-zA-Z0-9]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})",
    re.DOTALL,
)
_CLIENT_FINAL = re.compile(
    rf"(?P<bare>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})",
    re.DOTALL,
)


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism: its SASL name, Kafka's type id (UserScramCredentialRecord's
    ``mechanism``, AlterUserScramCredentials' ``mechanism``) and its hash."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_id: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_id = type_id
        self.hash_name = hash_name

    @property
    def min_iterations(self) -> int:
        return 4096

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_type(cls, type_id: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type_id == type_id), None)

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.digest(key, message, self.hash_name)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps of a SCRAM password (RFC 5802 §3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# (mechanism, user name) -> the user's credential, None when it has none.
ScramCredentialLookup = Callable[[ScramMechanism, str], "ScramCredential | None"]


def salted_password(mechanism: ScramMechanism, password: bytes, salt: bytes, i: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, i)


def scram_credential(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of ``password`` (UTF-8, as Kafka: no SASLprep)."""
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted, b"Server Key"),
        iterations=iterations,
    )


def client_proof(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int, auth_message: bytes
) -> bytes:
    """A client's proof (for the node's own clients and tests): ClientKey XOR ClientSignature."""
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    client_key = mechanism.hmac(salted, b"Client Key")
    signature = mechanism.hmac(mechanism.hash(client_key), auth_message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


def escape_username(name: str) -> str:
    """A user name as SCRAM writes it (``=`` -> ``=3D``, ``,`` -> ``=2C``)."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidCredentialsError(_FAILED) from None


# Derives the salts of made-up credentials; one per process, never leaves it.
_DECOY_SECRET = secrets.token_bytes(32)


def _decoy_credential(mechanism: ScramMechanism, user: str) -> ScramCredential:
    """A credential no password matches, stable per user name within this process."""
    salt = hmac.digest(_DECOY_SECRET, user.encode(), "sha256")[:16]
    key = hmac.digest(_DECOY_SECRET, b"key" + user.encode(), mechanism.hash_name)
    return ScramCredential(salt, key, key, mechanism.min_iterations)


class ScramSaslServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final (owned
    by the connection's authenticator, on the event loop)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: ScramCredentialLookup,
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self._mechanism = mechanism
        self._credentials = credentials
        self._nonce = nonce
        self._state = "first"
        self._user = ""
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._gs2_header = b""
        self._nonce_full = ""
        self._client_first_bare = b""
        self._server_first = b""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("ascii")
        except UnicodeDecodeError:
            raise InvalidCredentialsError(_FAILED) from None
        match self._state:
            case "first":
                return self._client_first(text)
            case "final":
                return self._client_final(text)
            case _:
                raise InvalidCredentialsError("Authentication failed: exchange already complete")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise InvalidCredentialsError("Authentication failed: invalid SCRAM client-first")
        user = unescape_username(match["saslname"])
        authzid = match["authzid"]
        if authzid and unescape_username(authzid) != user:
            raise InvalidCredentialsError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",") if item)
        if extensions.get("tokenauth", "").lower() == "true":
            raise InvalidCredentialsError(
                "Authentication failed: delegation tokens are not supported"
            )
        credential = self._credentials(self._mechanism, user)
        self._known_user = (
            credential is not None and credential.iterations >= self._mechanism.min_iterations
        )
        if credential is None or not self._known_user:
            credential = _decoy_credential(self._mechanism, user)
        self._credential = credential
        self._user = user
        self._gs2_header = text[: match.start("saslname") - 2].encode()
        self._client_first_bare = text[match.start("saslname") - 2 :].encode()
        self._nonce_full = match["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce_full},s={salt},i={credential.iterations}".encode()
        self._state = "final"
        return self._server_first

    def _client_final(self, text: str) -> bytes:
        self._state = "failed"
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise InvalidCredentialsError("Authentication failed: invalid SCRAM client-final")
        # Kafka accepts a final nonce that ends with ours: librdkafka before 2.1 sends its
        # own nonce again in front of the combined one.
        if not match["nonce"].endswith(self._nonce_full):
            raise InvalidCredentialsError(
                "Authentication failed: Invalid client nonce in the final client message."
            )
        if _b64decode(match["channel"]) != self._gs2_header:
            raise InvalidCredentialsError("Authentication failed: invalid channel binding")
        proof = _b64decode(match["proof"])
        auth_message = b",".join(
            (self._client_first_bare, self._server_first, match["bare"].encode())
        )
        credential = self._credential
        assert credential is not None
        mechanism = self._mechanism
        signature = mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise InvalidCredentialsError(_FAILED)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        valid = hmac.compare_digest(mechanism.hash(client_key), credential.stored_key)
        if not valid or not self._known_user:
            raise InvalidCredentialsError(_FAILED)
        self._state = "complete"
        server_signature = mechanism.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
