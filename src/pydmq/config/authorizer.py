"""The authorization properties (Kafka's names): which authorizer, and the
StandardAuthorizer's ``super.users`` and ``allow.everyone.if.no.acl.found``."""

from __future__ import annotations

from pydmq.config.definitions import ConfigDef
from pydmq.config.definitions import ConfigType as T

__all__ = ["AUTHORIZER_CONFIGS"]

AUTHORIZER_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        "authorizer.class.name",
        T.STRING,
        "",
        "The authorizer, by its registered name (Kafka's "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer is the built-in); empty: no "
        "authorization.",
        read_only=True,
    ),
    ConfigDef(
        "super.users",
        T.STRING,
        "",
        "Principals allowed everything, separated by semicolons (User:admin;User:broker).",
        read_only=True,
    ),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        T.BOOLEAN,
        False,
        "Whether a resource no ACL matches is open to everyone (StandardAuthorizer).",
        read_only=True,
    ),
)
