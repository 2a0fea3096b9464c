"""A small synchronous Kafka protocol client built on pydmq's own codecs.

Used by the ``pydmq`` CLI, tests and the chaos harness; needs nothing but pydmq::

    with KafkaClient("127.0.0.1:9092") as client:
        response = client.send(ApiKey.METADATA, MetadataRequest(topics=None))
"""

from __future__ import annotations

from pydmq.client.client import EARLIEST, LATEST, ApiKey, KafkaClient, PartitionInfo, TopicInfo
from pydmq.client.connection import BrokerConnection, parse_address
from pydmq.client.consumer import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConsumedRecord,
    Consumer,
    parse_fetched_records,
)
from pydmq.client.errors import (
    BrokerUnreachableError,
    KafkaConnectionError,
    KafkaError,
    UnsupportedApiError,
    error_name,
    raise_for_error,
)
from pydmq.client.partitioner import default_partition, murmur2, to_positive
from pydmq.client.producer import DeliveryReport, Producer, ProducerStats

__all__ = [
    "EARLIEST",
    "LATEST",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "ApiKey",
    "BrokerConnection",
    "BrokerUnreachableError",
    "ConsumedRecord",
    "Consumer",
    "DeliveryReport",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "PartitionInfo",
    "Producer",
    "ProducerStats",
    "TopicInfo",
    "UnsupportedApiError",
    "default_partition",
    "error_name",
    "murmur2",
    "parse_address",
    "parse_fetched_records",
    "raise_for_error",
    "to_positive",
]
