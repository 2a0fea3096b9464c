"""The built-in OAUTHBEARER validator, registered through the same hook a third party uses."""

from __future__ import annotations

from pydmq.plugins.markers import hookimpl
from pydmq.security.sasl.oauthbearer import UNSECURED_VALIDATOR, OAuthBearerValidatorSpec

__all__ = ["pydmq_register_oauthbearer_validators"]


@hookimpl
def pydmq_register_oauthbearer_validators() -> list[OAuthBearerValidatorSpec]:
    return [UNSECURED_VALIDATOR]
