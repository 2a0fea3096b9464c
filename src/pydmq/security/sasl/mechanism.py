"""What every server-side SASL mechanism is: a sans-IO object fed the client's tokens."""

from __future__ import annotations

from typing import Protocol

__all__ = ["SaslServer"]


class SaslServer(Protocol):
    """One exchange of one mechanism, created per SaslHandshake (owned by the connection's
    :class:`~pydmq.security.sasl.authenticator.SaslAuthenticator`, on the event loop).

    :meth:`evaluate_response` takes one client token (a SaslAuthenticate's ``auth_bytes``)
    and returns the server's challenge or final message; it raises
    :class:`~pydmq.security.sasl.errors.SaslAuthenticationError` on refused credentials or
    malformed tokens. Once :attr:`complete`, :attr:`authorization_id` is the user's name.
    """

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential stops being valid (epoch ms; an OAUTHBEARER token's ``exp``),
        None when it does not expire (KIP-368's session lifetime takes it into account)."""
        ...

    def evaluate_response(self, response: bytes) -> bytes: ...
