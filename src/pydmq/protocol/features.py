"""The feature levels this node supports, as ApiVersions (v3+) advertises them, and the levels
a new cluster is formatted with.

Read by the broker's and the controller's ApiVersions handlers, by a broker's registration,
and by the controller (a cluster's, or a single node's local one) when it writes the first
``FeatureLevelRecord``s of a new cluster. A feature absent from the metadata is at level 0, as
in Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "BOOTSTRAP_FEATURE_LEVELS",
    "METADATA_VERSION",
    "METADATA_VERSION_FEATURE",
    "SUPPORTED_FEATURES",
    "TRANSACTIONS_V2",
    "TRANSACTION_VERSION",
    "TRANSACTION_VERSION_FEATURE",
]

METADATA_VERSION_FEATURE: Final = "metadata.version"
TRANSACTION_VERSION_FEATURE: Final = "transaction.version"

# metadata.version levels: 3.3-IV3 = 7 ... 4.0-IV3 = 25; we behave like 4.0.
METADATA_VERSION: Final = 25
# transaction.version: 0 and 1 are transactions v1 (KIP-98; 1 adds the flexible record
# fields), 2 is transactions v2 (KIP-890 part 2: an epoch bump per transaction, partitions
# added by their leaders). Kafka 4.x formats new clusters at 2.
TRANSACTION_VERSION: Final = 2
TRANSACTIONS_V2: Final = 2
"""The ``transaction.version`` level from which clients use transactions v2."""

SUPPORTED_FEATURES: Final[Mapping[str, tuple[int, int]]] = {
    METADATA_VERSION_FEATURE: (1, METADATA_VERSION),
    TRANSACTION_VERSION_FEATURE: (0, TRANSACTION_VERSION),
    "group.version": (0, 0),
}
"""Each feature's supported (min, max) level, as ApiVersions advertises it."""

BOOTSTRAP_FEATURE_LEVELS: Final[Mapping[str, int]] = {
    METADATA_VERSION_FEATURE: METADATA_VERSION,
    TRANSACTION_VERSION_FEATURE: TRANSACTION_VERSION,
}
"""The finalized levels written at a new cluster's first start (Kafka's format defaults)."""
