"""The client side of PLAIN and SCRAM, sans-IO: what a node sends when it connects to
another node's SASL listener (``sasl.mechanism.inter.broker.protocol``,
``sasl.mechanism.controller.protocol``) and what pydmq's own command line sends.

A client gives its first token (:meth:`first_message`), then answers each server message
(:meth:`evaluate_challenge`) until it returns None: the exchange is over on its side.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Callable
from typing import Protocol

from pydmq.security.sasl.errors import SaslAuthenticationError
from pydmq.security.sasl.scram import (
    ScramMechanism,
    client_proof,
    escape_username,
    salted_password,
)

__all__ = ["PlainSaslClient", "SaslClient", "ScramSaslClient", "sasl_client"]


class SaslClient(Protocol):
    """One client-side exchange (owned by the connection that authenticates)."""

    mechanism: str

    def first_message(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...


class PlainSaslClient:
    """PLAIN: one message, ``NUL user NUL password``."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\x00" + username.encode() + b"\x00" + password.encode()

    def first_message(self) -> bytes:
        return self._message

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        return None


class ScramSaslClient:
    """SCRAM-SHA-256/512 without channel binding; checks the server's signature."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(24),
    ) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password
        self._first_bare = f"n={escape_username(username)},r={nonce()}"
        self._server_signature: bytes | None = None

    def first_message(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if self._server_signature is not None:
            expected = b"v=" + base64.b64encode(self._server_signature)
            if not hmac.compare_digest(challenge, expected):
                raise SaslAuthenticationError("the server's SCRAM signature is wrong")
            return None
        try:
            fields = dict(item.split("=", 1) for item in challenge.decode().split(","))
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (ValueError, KeyError, UnicodeDecodeError):
            raise SaslAuthenticationError("invalid SCRAM server-first message") from None
        if not nonce.startswith(self._first_bare.rpartition(",r=")[2]):
            raise SaslAuthenticationError("the server's SCRAM nonce does not extend ours")
        final_bare = f"c=biws,r={nonce}"
        auth = f"{self._first_bare},{challenge.decode()},{final_bare}".encode()
        scram = self._scram
        proof = client_proof(scram, self._password, salt, iterations, auth)
        salted = salted_password(scram, self._password.encode(), salt, iterations)
        self._server_signature = scram.hmac(scram.hmac(salted, b"Server Key"), auth)
        return f"{final_bare},p={base64.b64encode(proof).decode()}".encode()


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A client of ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    scram = ScramMechanism.by_name(mechanism)
    if scram is None:
        raise ValueError(f"pydmq's clients speak PLAIN and SCRAM, not {mechanism}")
    return ScramSaslClient(scram, username, password)
