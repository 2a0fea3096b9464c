"""The finalized feature levels of the metadata (Kafka's ``FeaturesImage`` reads), sans-IO.

A new cluster (no ``metadata.version`` finalized yet) is formatted at
:data:`~pydmq.protocol.features.BOOTSTRAP_FEATURE_LEVELS`: its first controller, a cluster's
active one or a single node's local one, commits :func:`bootstrap_feature_records`. A feature
the metadata does not name is at level 0, as in Kafka.
"""

from __future__ import annotations

from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import FeatureLevelRecord, MetadataRecord
from pydmq.protocol.features import (
    BOOTSTRAP_FEATURE_LEVELS,
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
)

__all__ = ["bootstrap_feature_records"]


def bootstrap_feature_records(
    image: MetadataImage,
    transaction_version: int = BOOTSTRAP_FEATURE_LEVELS[TRANSACTION_VERSION_FEATURE],
) -> list[MetadataRecord]:
    """The records that finalize a new cluster's feature levels, ``transaction.version`` at
    ``transaction_version`` (``pydmq.bootstrap.transaction.version``); none once ``image``
    has a ``metadata.version`` (a cluster formatted before keeps its levels)."""
    if METADATA_VERSION_FEATURE in image.features:
        return []
    levels = {**BOOTSTRAP_FEATURE_LEVELS, TRANSACTION_VERSION_FEATURE: transaction_version}
    records: list[MetadataRecord] = [
        FeatureLevelRecord(name, level) for name, level in levels.items()
    ]
    return records
