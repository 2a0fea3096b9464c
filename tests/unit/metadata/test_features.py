"""The finalized feature levels a new cluster is formatted with (``metadata.version``,
``transaction.version`` 2 as Kafka 4.x), written once: a cluster that has a
``metadata.version`` keeps its levels."""

from __future__ import annotations

import pytest

from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.features import bootstrap_feature_records
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import FeatureLevelRecord
from pydmq.protocol.features import METADATA_VERSION

pytestmark = pytest.mark.timeout(10)


def test_a_new_cluster_is_formatted_at_transactions_v2() -> None:
    records = bootstrap_feature_records(MetadataImage())
    assert records == [
        FeatureLevelRecord("metadata.version", METADATA_VERSION),
        FeatureLevelRecord("transaction.version", 2),
    ]
    delta = MetadataDelta(MetadataImage())
    for record in records:
        delta.replay(record)
    image = delta.apply(0, 1)
    assert image.features == {"metadata.version": METADATA_VERSION, "transaction.version": 2}
    assert bootstrap_feature_records(image) == []


def test_a_formatted_cluster_keeps_its_levels() -> None:
    delta = MetadataDelta(MetadataImage())
    delta.replay(FeatureLevelRecord("metadata.version", 7))
    assert bootstrap_feature_records(delta.apply(0, 1)) == []
