"""SaslHandshake (key 17), v1: the role-neutral handler of :mod:`pydmq.api.sasl`."""

from __future__ import annotations

from pydmq.api.sasl import SASL_HANDSHAKE_HANDLER

__all__ = ["HANDLER"]

HANDLER = SASL_HANDSHAKE_HANDLER
