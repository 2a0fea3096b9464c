"""``pydmq serve`` whose one client listener speaks SASL (SASL_PLAINTEXT or SASL_SSL), with the
SCRAM-SHA-512 user ``admin`` created at its first start and PLAIN users in :data:`PLAIN_JAAS`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydmq.testing.process import BrokerProcess

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_SEED = "SCRAM-SHA-512=[name=admin,password=admin-secret]"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)


class SaslListenerBroker(BrokerProcess):
    """The broker process with its listener's protocol set to ``protocol``."""

    def __init__(self, data_dir: str | Path, protocol: str, **kwargs: Any) -> None:
        super().__init__(data_dir, **kwargs)
        self.protocol = protocol

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listeners") + 1] = f"{self.protocol}://{self.host}:{self.port}"
        return [*cmd, "--add-scram", SCRAM_SEED]
