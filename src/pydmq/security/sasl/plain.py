"""SASL/PLAIN (RFC 4616) on the server side, with Kafka's ``PlainLoginModule`` users.

The users are the ``user_<name>="<password>"`` options of the listener's JAAS entry (the
``username``/``password`` options are the node's own credentials as a client). The client's
single message is ``authzid NUL authcid NUL passwd``; the authorization id, when given, must be
the user name. Passwords are compared in constant time, and an unknown user is compared
against a dummy password, so neither the message nor the time tells whether a user exists.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.jaas import JaasLoginModule

__all__ = ["PLAIN_LOGIN_MODULE", "PlainSaslServer", "plain_users"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_PREFIX = "user_"
_UNKNOWN = b"\x00" * 32


def plain_users(entry: JaasLoginModule) -> dict[str, str]:
    """User name -> password, from the ``user_<name>`` options of ``entry``."""
    return {
        key[len(_USER_PREFIX) :]: value
        for key, value in entry.options.items()
        if key.startswith(_USER_PREFIX)
    }


class PlainSaslServer:
    """One PLAIN exchange: a single client message, an empty answer (owned by the
    connection's authenticator, on the event loop)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        return self._user

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def evaluate_response(self, response: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationError("Authentication failed: exchange already complete")
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
            )
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(user)
        match = hmac.compare_digest(
            password.encode(), _UNKNOWN if expected is None else expected.encode()
        )
        if not match or expected is None:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        self._user = user
        self._complete = True
        return b""
