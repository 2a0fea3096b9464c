"""The built-in authorizer, registered through the same hook a third party uses."""

from __future__ import annotations

from pydmq.plugins.markers import hookimpl
from pydmq.security.authorizer import AuthorizerSpec
from pydmq.security.standard_authorizer import STANDARD_AUTHORIZER_SPEC

__all__ = ["pydmq_register_authorizers"]


@hookimpl
def pydmq_register_authorizers() -> list[AuthorizerSpec]:
    return [STANDARD_AUTHORIZER_SPEC]
