"""A pydmq broker process on a SASL_PLAINTEXT listener, with Kafka's JAAS users, for the
SASL interop tests (and the same settings for the reference Kafka in the differential test).
"""

from __future__ import annotations

from pathlib import Path

from pydmq.testing.process import BrokerProcess

from .conftest import DEFAULT_OVERRIDES

__all__ = ["JAAS_PLAIN", "SASL_OVERRIDES", "USERS", "SaslBrokerProcess"]

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
JAAS_PLAIN = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    + ";"
)
SASL_OVERRIDES = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
}


class SaslBrokerProcess(BrokerProcess):
    """``pydmq serve`` whose one listener is SASL_PLAINTEXT."""

    def __init__(
        self,
        data_dir: Path,
        overrides: dict[str, str] | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.extra_args = extra_args
        super().__init__(
            data_dir,
            overrides={**DEFAULT_OVERRIDES, **SASL_OVERRIDES, **(overrides or {})},
            log_path=data_dir.parent / "sasl-broker.log",
        )

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listeners") + 1] = f"SASL_PLAINTEXT://{self.host}:{self.port}"
        return [*cmd, *self.extra_args]
