"""What a SASL listener accepts, read from the node's configuration with Kafka's names and
precedence, and the factory of its connections' authenticators.

For listener ``L`` and mechanism ``M`` (both lower case in property names, as Kafka writes
them): the enabled mechanisms are ``listener.name.L.sasl.enabled.mechanisms``, else
``sasl.enabled.mechanisms``; the JAAS entry is ``listener.name.L.M.sasl.jaas.config``, else
``sasl.jaas.config``; the session lifetime is ``listener.name.L.M.connections.max.reauth.ms``,
else ``listener.name.L.connections.max.reauth.ms``, else ``connections.max.reauth.ms``.
Checked at start-up (ConfigError): GSSAPI and unknown mechanisms are refused, PLAIN needs a
``PlainLoginModule`` entry (its ``user_<name>`` options are the users).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from pydmq.config.broker import BrokerConfig
from pydmq.config.definitions import ConfigError
from pydmq.security.sasl.authenticator import SaslAuthenticator
from pydmq.security.sasl.client import SaslClient, sasl_client
from pydmq.security.sasl.jaas import JaasConfigError, JaasLoginModule, single_login_module
from pydmq.security.sasl.mechanism import SaslServer
from pydmq.security.sasl.oauthbearer import (
    OAuthBearerSaslServer,
    TokenValidator,
    UnsecuredJwsValidator,
)
from pydmq.security.sasl.plain import PLAIN_LOGIN_MODULE, PlainSaslServer, plain_users
from pydmq.security.sasl.protocols import is_sasl_listener
from pydmq.security.sasl.scram import ScramCredentialLookup, ScramMechanism, ScramSaslServer

__all__ = [
    "SUPPORTED_MECHANISMS",
    "SaslListener",
    "SaslListenerSettings",
    "jaas_entry",
    "node_sasl_client",
]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# OAUTHBEARER validator options (JAAS) -> a validator; a plugin may supply its own.
ValidatorFactory = Callable[[Mapping[str, str]], TokenValidator]


@dataclass(frozen=True, slots=True)
class SaslListenerSettings:
    """One SASL listener's mechanisms, JAAS entries by mechanism and session lifetimes."""

    listener: str
    enabled_mechanisms: tuple[str, ...]
    jaas: Mapping[str, JaasLoginModule]
    max_reauth_ms: Mapping[str, int]
    failure_delay_ms: int = 0
    max_receive_size: int = 524288

    @classmethod
    def from_config(cls, config: BrokerConfig, listener: str) -> SaslListenerSettings:
        prefixed = config.listener_sasl.get(listener.lower(), {})
        raw = prefixed.get("sasl.enabled.mechanisms")
        enabled = (
            [m.strip() for m in raw.split(",") if m.strip()]
            if raw is not None
            else config.get_list("sasl.enabled.mechanisms")
        )
        if not enabled:
            raise ConfigError(f"listener {listener} is SASL but enables no SASL mechanism")
        for mechanism in enabled:
            if mechanism not in SUPPORTED_MECHANISMS:
                raise ConfigError(
                    f"listener {listener} enables SASL mechanism {mechanism}, which pydmq does "
                    f"not support (set sasl.enabled.mechanisms to some of "
                    f"{', '.join(SUPPORTED_MECHANISMS)})"
                )
        jaas: dict[str, JaasLoginModule] = {}
        reauth: dict[str, int] = {}
        for mechanism in enabled:
            entry = jaas_entry(config, listener, mechanism)
            if entry is not None:
                jaas[mechanism] = entry
            reauth[mechanism] = _reauth_ms(config, prefixed, mechanism)
        plain = jaas.get("PLAIN")
        if "PLAIN" in enabled and (plain is None or plain.login_module != PLAIN_LOGIN_MODULE):
            raise ConfigError(
                f"listener {listener} enables PLAIN: set listener.name.{listener.lower()}."
                f"plain.sasl.jaas.config (or sasl.jaas.config) to a {PLAIN_LOGIN_MODULE} "
                'entry with its users (user_<name>="<password>")'
            )
        return cls(
            listener,
            tuple(enabled),
            jaas,
            reauth,
            config.get_int("connection.failed.authentication.delay.ms"),
            config.get_int("sasl.server.max.receive.size"),
        )


def node_sasl_client(
    config: BrokerConfig, listener: str, mechanism_property: str
) -> Callable[[], SaslClient] | None:
    """How this node authenticates to another node's ``listener``: None when that listener
    is not SASL, else a factory of clients of the mechanism ``mechanism_property`` names
    (``sasl.mechanism.inter.broker.protocol`` or ``sasl.mechanism.controller.protocol``), with
    the ``username`` and ``password`` of that listener's JAAS entry for the mechanism, as
    Kafka's brokers do. ConfigError when they are missing or the mechanism is not PLAIN or
    SCRAM."""
    if not is_sasl_listener(config, listener):
        return None
    mechanism = config.get_str(mechanism_property)
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(
            f"{mechanism_property}={mechanism}: pydmq's nodes authenticate to the SASL "
            f"listener {listener} with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
        )
    entry = jaas_entry(config, listener, mechanism)
    options = {} if entry is None else entry.options
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ConfigError(
            f"the node authenticates to {listener} with {mechanism}: its JAAS entry "
            f"(listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config or "
            "sasl.jaas.config) needs username and password"
        )
    return lambda: sasl_client(mechanism, username, password)


def jaas_entry(config: BrokerConfig, listener: str, mechanism: str) -> JaasLoginModule | None:
    """The JAAS entry of ``mechanism`` on ``listener`` (see the module docstring)."""
    prefixed = config.listener_sasl.get(listener.lower(), {})
    text = prefixed.get(f"{mechanism.lower()}.sasl.jaas.config")
    source = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if text is None:
        value = config.get("sasl.jaas.config")
        text, source = (None if value is None else str(value)), "sasl.jaas.config"
    if text is None:
        return None
    try:
        return single_login_module(text)
    except JaasConfigError as exc:
        raise ConfigError(f"invalid {source}: {exc}") from None


def _reauth_ms(config: BrokerConfig, prefixed: Mapping[str, str], mechanism: str) -> int:
    for key in (f"{mechanism.lower()}.connections.max.reauth.ms", "connections.max.reauth.ms"):
        if key in prefixed:
            try:
                return max(int(prefixed[key]), 0)
            except ValueError:
                raise ConfigError(f"listener.name.*.{key} must be an integer") from None
    return config.get_int("connections.max.reauth.ms")


class SaslListener:
    """Makes the authenticator of each new connection of one SASL listener. Built by the
    node at start-up; its lookups are the node's current SCRAM credentials and the
    OAUTHBEARER validator (Kafka's unsecured one unless a plugin gives another)."""

    def __init__(
        self,
        settings: SaslListenerSettings,
        scram_credentials: ScramCredentialLookup,
        validator_factory: ValidatorFactory | None = None,
    ) -> None:
        self.settings = settings
        self._scram = scram_credentials
        self._plain_users: dict[str, str] = {}
        plain = settings.jaas.get("PLAIN")
        if plain is not None:
            self._plain_users = plain_users(plain)
        self._validator: TokenValidator | None = None
        if "OAUTHBEARER" in settings.enabled_mechanisms:
            entry = settings.jaas.get("OAUTHBEARER")
            options = {} if entry is None else entry.options
            factory = validator_factory or UnsecuredJwsValidator
            try:
                self._validator = factory(options)
            except ValueError as exc:
                raise ConfigError(f"listener {settings.listener}: {exc}") from None

    def new_authenticator(self) -> SaslAuthenticator:
        reauth = self.settings.max_reauth_ms
        return SaslAuthenticator(
            self.settings.enabled_mechanisms,
            self._server,
            lambda m: reauth.get(m, 0),
            failure_delay_ms=self.settings.failure_delay_ms,
            max_receive_size=self.settings.max_receive_size,
        )

    def password_credential(self, mechanism: str, user: str) -> Hashable | None:
        """What this listener holds for ``user`` under the password mechanism ``mechanism``
        (PLAIN's configured password, or the user's SCRAM credential as the metadata has it
        now), None when ``user`` cannot log in with it: equal values mean the same password
        is still the valid one."""
        if mechanism not in self.settings.enabled_mechanisms:
            return None
        if mechanism == "PLAIN":
            return self._plain_users.get(user)
        scram = ScramMechanism.by_name(mechanism)
        return None if scram is None else self._scram(scram, user)

    def _server(self, mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainSaslServer(self._plain_users)
        if mechanism == "OAUTHBEARER":
            assert self._validator is not None
            return OAuthBearerSaslServer(self._validator)
        scram = ScramMechanism.by_name(mechanism)
        assert scram is not None, mechanism
        return ScramSaslServer(scram, self._scram)
