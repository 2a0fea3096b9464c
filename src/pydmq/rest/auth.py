"""HTTP Basic credentials checked as a Kafka SASL login: the user and password drive the
node's own SASL exchange (:class:`~pydmq.security.sasl.listener.SaslListener`'s
authenticator) with pydmq's PLAIN or SCRAM client, so the users are the SASL listener's
(PLAIN's JAAS users, the SCRAM credentials in the metadata) and the principal is the one a
Kafka client logging in with them gets; the ACLs then apply to it as to that client.

A SCRAM login costs the client's PBKDF2 (milliseconds of the event loop, where Kafka leaves
it to the client), so: a mechanism the user has no credential for is not tried at all, and a
successful login is remembered (a keyed digest of the password, never the password) for as
long as the user's credential stays the same; a changed or deleted credential misses.
"""

from __future__ import annotations

import hmac
import os
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.protocol.errors import ErrorCode
from pydmq.security.sasl.authenticator import SaslState
from pydmq.security.sasl.client import sasl_client
from pydmq.security.sasl.errors import SaslAuthenticationError

if TYPE_CHECKING:
    from pydmq.security.sasl.listener import SaslListener

__all__ = ["SaslPasswordCheck"]

_PASSWORD_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
_MAX_ROUNDS = 4
_REMEMBERED = 1024  # successful logins kept, least recently used out first


@dataclass(frozen=True, slots=True)
class _Login:
    """A successful login: the credential it was checked against, the keyed digest of the
    password that passed, and the principal it gave."""

    credential: Hashable
    digest: bytes
    principal: str


class SaslPasswordCheck:
    """``check(user, password)``: the principal name of a successful login with any of the
    listener's password mechanisms (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), else None. Called
    on the event loop by the HTTP Basic gate. ``expensive_checks`` counts the logins that ran
    a full exchange (the ones not answered from a remembered login)."""

    def __init__(self, listener: SaslListener) -> None:
        self._listener = listener
        enabled = listener.settings.enabled_mechanisms
        self.mechanisms = tuple(m for m in _PASSWORD_MECHANISMS if m in enabled)
        self._key = os.urandom(32)  # per process: the digests mean nothing elsewhere
        self._logins: OrderedDict[tuple[str, str], _Login] = OrderedDict()
        self.expensive_checks = 0

    def __call__(self, user: str, password: str) -> str | None:
        digest = hmac.digest(self._key, f"{user}\0{password}".encode(), "sha256")
        for mechanism in self.mechanisms:
            credential = self._listener.password_credential(mechanism, user)
            if credential is None:
                continue
            key = (mechanism, user)
            known = self._logins.get(key)
            if (
                known is not None
                and known.credential == credential
                and hmac.compare_digest(known.digest, digest)
            ):
                self._logins.move_to_end(key)
                return known.principal
            self.expensive_checks += 1
            principal = self._login(mechanism, user, password)
            if principal is not None:
                self._remember(key, _Login(credential, digest, principal))
                return principal
        return None

    def _remember(self, key: tuple[str, str], login: _Login) -> None:
        self._logins[key] = login
        self._logins.move_to_end(key)
        while len(self._logins) > _REMEMBERED:
            self._logins.popitem(last=False)

    def _login(self, mechanism: str, user: str, password: str) -> str | None:
        authenticator = self._listener.new_authenticator()
        if authenticator.handshake(mechanism).error_code != ErrorCode.NONE:
            return None
        client = sasl_client(mechanism, user, password)
        token: bytes | None = client.first_message()
        for _ in range(_MAX_ROUNDS):
            if token is None:
                return None
            outcome = authenticator.authenticate(token)
            if outcome.error_code != ErrorCode.NONE:
                return None
            if authenticator.state is SaslState.AUTHENTICATED:
                return authenticator.principal.name
            try:
                token = client.evaluate_challenge(outcome.auth_bytes)
            except SaslAuthenticationError:
                return None
        return None
