"""The two ways a SASL exchange fails, as Kafka names them."""

from __future__ import annotations

__all__ = ["IllegalSaslStateError", "InvalidCredentialsError", "SaslAuthenticationError"]


class SaslAuthenticationError(Exception):
    """The client's credentials or tokens are refused: SASL_AUTHENTICATION_FAILED (58) with
    this message, then the connection closes. The message never says whether a user exists."""


class IllegalSaslStateError(Exception):
    """A request out of the exchange's order (ILLEGAL_SASL_STATE, 34, where Kafka answers
    it; otherwise the connection closes)."""


class InvalidCredentialsError(SaslAuthenticationError):
    """A refusal whose message the client must not see in detail (any SCRAM failure, as
    Kafka's SCRAM server raises them): answered with Kafka's generic "Authentication failed
    during authentication due to invalid credentials with SASL mechanism <mechanism>"."""
