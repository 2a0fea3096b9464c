"""Cluster metadata, KRaft style: records, the immutable image, and replay (sans-IO).

- :mod:`pydmq.metadata.records`: one frozen dataclass per record type and their codec.
- :mod:`pydmq.metadata.image`: :class:`MetadataImage` and its parts.
- :mod:`pydmq.metadata.delta`: :class:`MetadataDelta`, replaying records into a new image.
"""

from pydmq.metadata.delta import MetadataDelta, MetadataReplayError
from pydmq.metadata.image import (
    BrokerRegistration,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pydmq.metadata.records import (
    CorruptRecordError,
    Endpoint,
    MetadataRecord,
    decode_record,
    encode_record,
)

__all__ = [
    "BrokerRegistration",
    "CorruptRecordError",
    "Endpoint",
    "MetadataDelta",
    "MetadataImage",
    "MetadataRecord",
    "MetadataReplayError",
    "PartitionRegistration",
    "TopicImage",
    "TopicsImage",
    "decode_record",
    "encode_record",
]
