"""Small checks shared by the bad-input, probe and crash tests (all bounded by timeouts)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData

from .raw_client import RawClient

__all__ = [
    "assert_serves",
    "create_topic",
    "init_producer_id",
    "list_offset",
    "produce_raw",
    "rss_kib",
    "unique_topic",
]

LATEST = -1
EARLIEST = -2


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def assert_serves(bootstrap: str, timeout: float = 10.0) -> None:
    """A fresh, well-behaved connection still gets ApiVersions and Metadata answers."""
    with RawClient(bootstrap, timeout=timeout) as client:
        versions = client.request(
            18, 3, ApiVersionsRequest(client_software_name="probe", client_software_version="1.0")
        )
        assert versions.body.error_code == 0
        assert any(k.api_key == 3 for k in versions.body.api_keys)
        metadata = client.request(
            3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)
        )
        assert metadata.body.brokers, "Metadata lists no broker"


def create_topic(
    client: RawClient,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    version: int = 7,
) -> int:
    """CreateTopics; returns the topic's error code."""
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout=10_000,
    )
    response = client.request(19, version, request)
    (result,) = response.body.topics
    return int(result.error_code)


def metadata_topic_error(
    client: RawClient, name: str, auto_create: bool = True, version: int = 12
) -> int:
    response = client.request(
        3,
        version,
        MetadataRequest(
            topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=auto_create
        ),
    )
    (topic,) = response.body.topics
    return int(topic.error_code)


def list_offset(client: RawClient, topic: str, partition: int = 0, timestamp: int = LATEST) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[ListOffsetsPartition(partition_index=partition, timestamp=timestamp)],
            )
        ],
    )
    response = client.request(2, 7, request)
    (t,) = response.body.topics
    (p,) = t.partitions
    assert p.error_code == 0, f"ListOffsets error {p.error_code}"
    return int(p.offset)


def produce_request(
    topic: str, records: bytes, partition: int = 0, acks: int = -1
) -> ProduceRequest:
    """A Produce of one record set to one partition."""
    return ProduceRequest(
        acks=acks,
        timeout=10_000,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=records)]
            )
        ],
    )


def produce_raw(
    client: RawClient,
    topic: str,
    records: bytes,
    *,
    partition: int = 0,
    acks: int = -1,
    version: int = 9,
) -> Any:
    """Produce one record set; returns the partition response."""
    response = client.request(0, version, produce_request(topic, records, partition, acks))
    (t,) = response.body.responses
    (p,) = t.partition_responses
    return p


def init_producer_id(client: RawClient) -> tuple[int, int]:
    response = client.request(22, 4, InitProducerIdRequest(transaction_timeout=60_000))
    assert response.body.error_code == 0
    return int(response.body.producer_id), int(response.body.producer_epoch)


def wait_until(predicate: Callable[[], object], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
