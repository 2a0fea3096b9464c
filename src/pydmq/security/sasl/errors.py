"""The two ways a SASL exchange fails, as Kafka names them."""

from __future__ import annotations

__all__ = ["IllegalSaslStateError", "SaslAuthenticationError"]


class SaslAuthenticationError(Exception):
    """The client's credentials or tokens are refused: SASL_AUTHENTICATION_FAILED (58) with
    this message, then the connection closes. The message never says whether a user exists."""


class IllegalSaslStateError(Exception):
    """A request out of the exchange's order (ILLEGAL_SASL_STATE, 34, where Kafka answers
    it; otherwise the connection closes)."""
