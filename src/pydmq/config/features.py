"""The feature levels a new cluster is formatted with (Kafka's ``kafka-storage.sh format
--feature NAME=LEVEL``), as pydmq properties read once, at the first start of the cluster's
first controller (a single node's local one); a cluster formatted before keeps its levels.
"""

from __future__ import annotations

from pydmq.config.definitions import ConfigDef
from pydmq.config.definitions import ConfigType as T

__all__ = ["BOOTSTRAP_TRANSACTION_VERSION", "FEATURE_CONFIGS"]

BOOTSTRAP_TRANSACTION_VERSION = "pydmq.bootstrap.transaction.version"


def _transaction_version(value: object) -> str | None:
    return None if isinstance(value, int) and 0 <= value <= 2 else "must be 0, 1 or 2"


FEATURE_CONFIGS: tuple[ConfigDef, ...] = (
    ConfigDef(
        BOOTSTRAP_TRANSACTION_VERSION,
        T.INT,
        2,
        "The transaction.version a new cluster is formatted with (Kafka's format --feature "
        "transaction.version=N): 2, Kafka 4.x's default, is transactions v2 (KIP-890 part "
        "2), which Kafka 4 clients then use; 1 keeps every client on transactions v1.",
        _transaction_version,
        read_only=True,
    ),
)
