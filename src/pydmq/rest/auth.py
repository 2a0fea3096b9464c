"""HTTP Basic credentials checked as a Kafka SASL login: the user and password drive the
node's own SASL exchange (:class:`~pydmq.security.sasl.listener.SaslListener`'s
authenticator) with pydmq's PLAIN or SCRAM client, so the users are the SASL listener's
(PLAIN's JAAS users, the SCRAM credentials in the metadata) and the principal is the one a
Kafka client logging in with them gets; the ACLs then apply to it as to that client.
"""

from __future__ import annotations

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


class SaslPasswordCheck:
    """``check(user, password)``: the principal name of a successful login with any of the
    listener's password mechanisms (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), else None. Called
    on the event loop by the HTTP Basic gate."""

    def __init__(self, listener: SaslListener) -> None:
        self._listener = listener
        enabled = listener.settings.enabled_mechanisms
        self.mechanisms = tuple(m for m in _PASSWORD_MECHANISMS if m in enabled)

    def __call__(self, user: str, password: str) -> str | None:
        for mechanism in self.mechanisms:
            principal = self._login(mechanism, user, password)
            if principal is not None:
                return principal
        return None

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
