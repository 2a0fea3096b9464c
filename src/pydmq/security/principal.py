"""``KafkaPrincipal``: the identity a request is authorized as, in Kafka's ``Type:Name`` form.

A connection starts as ``User:ANONYMOUS`` (Kafka's principal for PLAINTEXT listeners and for
SSL listeners without client certificates); authentication (an mTLS certificate, a SASL
exchange) replaces it on the connection, and each request's context carries the principal of
its connection at the time it arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "USER_TYPE", "KafkaPrincipal"]

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal type (``User``, ``Group``, or a plugin's own) and a name."""

    principal_type: str
    name: str

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); the name may hold colons."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"a principal looks like User:name, not {text!r}")
        return cls(principal_type, name)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
