"""SaslAuthenticate (key 36), v0-v2: the role-neutral handler of :mod:`pydmq.api.sasl`."""

from __future__ import annotations

from pydmq.api.sasl import SASL_AUTHENTICATE_HANDLER

__all__ = ["HANDLER"]

HANDLER = SASL_AUTHENTICATE_HANDLER
