"""The built-in OAUTHBEARER validator, registered through the same hook a third party uses.

The validator's module is imported when the hook is called (a node with SASL listeners, at
start-up), not when the built-in plugins are listed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.plugins.markers import hookimpl

if TYPE_CHECKING:
    from pydmq.security.sasl.oauthbearer import OAuthBearerValidatorSpec

__all__ = ["pydmq_register_oauthbearer_validators"]


@hookimpl
def pydmq_register_oauthbearer_validators() -> list[OAuthBearerValidatorSpec]:
    from pydmq.security.sasl.oauthbearer import UNSECURED_VALIDATOR

    return [UNSECURED_VALIDATOR]
