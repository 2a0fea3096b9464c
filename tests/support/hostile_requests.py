"""Request bodies that cost the decoder far more than their bytes (shared by the budget tests).

A hostile body repeats one small element (an empty topic entry, a null-records partition, an
empty name, a tagged field) millions of times. Encoding millions of elements with the codecs
would take longer than the test, so :func:`repeated_body` encodes the request with one and
with two copies of the element and splices: the two encodings differ only in the count and in
one more copy of the element, which gives the head, the count's position and the element's
bytes; any count is then written directly.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydmq.protocol.framing import finish_frame, start_frame
from pydmq.protocol.headers import encode_request_header
from pydmq.protocol.messages import API_SCHEMAS
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pydmq.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsTopic
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from pydmq.protocol.messages.describe_producers import DescribeProducersRequest
from pydmq.protocol.messages.describe_producers import TopicRequest as DescribeProducersTopic
from pydmq.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsTopic
from pydmq.protocol.messages.list_transactions import ListTransactionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitRequestTopic
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
)
from pydmq.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderTopic,
)
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestTopic,
)
from pydmq.protocol.messages.update_metadata import (
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)
from pydmq.protocol.messages.write_txn_markers import WritableTxnMarker, WriteTxnMarkersRequest
from pydmq.protocol.primitives import Writer

__all__ = ["SHAPES", "HostileShape", "header_tag_flood_frame", "repeated_body", "tag_flood_body"]

_I32 = struct.Struct(">i")


def _encode(api_key: int, version: int, request: Any) -> bytes:
    w = Writer()
    API_SCHEMAS[api_key].encode_request(w, request, version)
    return w.getvalue()


def _count(flexible: bool, n: int) -> bytes:
    if not flexible:
        return _I32.pack(n)
    w = Writer()
    w.uvarint(n + 1)
    return w.getvalue()


def repeated_body(
    api_key: int, version: int, build: Callable[[list[Any]], Any], element: Any, n: int
) -> bytes:
    """The body of ``build([element] * n)``, without encoding ``n`` elements."""
    flexible = API_SCHEMAS[api_key].is_flexible(version)
    one = _encode(api_key, version, build([element]))
    two = _encode(api_key, version, build([element, element]))
    size = len(two) - len(one)
    first_difference = next(i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b)
    count_len = 1 if flexible else 4
    start = first_difference - (count_len - 1)
    assert one[start : start + count_len] == _count(flexible, 1), (api_key, version)
    element_bytes = one[start + count_len : start + count_len + size]
    tail = one[start + count_len + size :]
    return one[:start] + _count(flexible, n) + element_bytes * n + tail


def tag_flood_body(api_key: int, version: int, request: Any, n: int) -> bytes:
    """``request`` encoded with ``n`` unknown (empty) tagged fields in its root struct."""
    body = _encode(api_key, version, request)
    assert body[-1] == 0, "the root's tagged-field section must be last and empty"
    return body[:-1] + _tag_flood(n)


def _tag_flood(n: int) -> bytes:
    """A tagged-field section of ``n`` empty fields, all tag 1000 (a count and 3 bytes each)."""
    w = Writer()
    w.uvarint(n)
    w.uvarint(1000)
    w.uvarint(0)
    count = w.getvalue()[:-3]
    return count + w.getvalue()[-3:] * n


def header_tag_flood_frame(api_key: int, version: int, body: bytes, n: int) -> bytes:
    """A whole frame (size prefix included) whose v2 request header has ``n`` tagged fields."""
    w = start_frame()
    # A v1 header followed by the tagged-field section that makes it a v2 one.
    encode_request_header(w, api_key, version, 1, "hostile", header_version=1)
    w.raw(_tag_flood(n))
    w.raw(body)
    return bytes(finish_frame(w))


@dataclass(frozen=True)
class HostileShape:
    """One request of ``n`` copies of a small element: ``body(n)`` gives its bytes."""

    name: str
    api_key: int
    version: int
    build: Callable[[list[Any]], Any]
    element: Any

    def body(self, n: int) -> bytes:
        return repeated_body(self.api_key, self.version, self.build, self.element, n)

    @property
    def element_size(self) -> int:
        return len(self.body(2)) - len(self.body(1))


def _produce_topics(topics: list[Any]) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout=1000, topic_data=topics)


def _produce_partitions(partitions: list[Any]) -> ProduceRequest:
    return ProduceRequest(
        acks=1, timeout=1000, topic_data=[TopicProduceData(name="t", partition_data=partitions)]
    )


def _fetch_partitions(partitions: list[Any]) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        topics=[FetchTopic(topic="t", partitions=partitions)],
    )


def _offset_fetch_groups(groups: list[Any]) -> OffsetFetchRequest:
    return OffsetFetchRequest(groups=groups)


def _shapes() -> list[HostileShape]:
    empty_produce_topic = TopicProduceData(name="", partition_data=[])
    null_records = PartitionProduceData(index=0, records=None)
    return [
        HostileShape("produce-empty-topics", 0, 8, _produce_topics, empty_produce_topic),
        HostileShape("produce-empty-topics", 0, 9, _produce_topics, empty_produce_topic),
        HostileShape("produce-empty-partitions", 0, 8, _produce_partitions, null_records),
        HostileShape("produce-empty-partitions", 0, 9, _produce_partitions, null_records),
        HostileShape("fetch-partitions", 1, 11, _fetch_partitions, FetchPartition(partition=0)),
        HostileShape("fetch-partitions", 1, 12, _fetch_partitions, FetchPartition(partition=0)),
        HostileShape(
            "list-offsets-empty-topics",
            2,
            5,
            lambda topics: ListOffsetsRequest(replica_id=-1, topics=topics),
            ListOffsetsTopic(name="", partitions=[]),
        ),
        HostileShape(
            "list-offsets-empty-topics",
            2,
            6,
            lambda topics: ListOffsetsRequest(replica_id=-1, topics=topics),
            ListOffsetsTopic(name="", partitions=[]),
        ),
        HostileShape(
            "metadata-empty-names",
            3,
            4,
            lambda topics: MetadataRequest(topics=topics, allow_auto_topic_creation=True),
            MetadataRequestTopic(name=""),
        ),
        HostileShape(
            "metadata-empty-names",
            3,
            9,
            lambda topics: MetadataRequest(topics=topics, allow_auto_topic_creation=True),
            MetadataRequestTopic(name=""),
        ),
        HostileShape(
            "offset-commit-empty-topics",
            8,
            7,
            lambda topics: OffsetCommitRequest(group_id="g", member_id="", topics=topics),
            OffsetCommitRequestTopic(name="", partitions=[]),
        ),
        HostileShape(
            "offset-commit-empty-topics",
            8,
            8,
            lambda topics: OffsetCommitRequest(group_id="g", member_id="", topics=topics),
            OffsetCommitRequestTopic(name="", partitions=[]),
        ),
        HostileShape(
            "offset-fetch-empty-topics",
            9,
            5,
            lambda topics: OffsetFetchRequest(group_id="g", topics=topics),
            OffsetFetchRequestTopic(name="", partition_indexes=[]),
        ),
        HostileShape(
            "offset-fetch-empty-topics",
            9,
            7,
            lambda topics: OffsetFetchRequest(group_id="g", topics=topics),
            OffsetFetchRequestTopic(name="", partition_indexes=[]),
        ),
        HostileShape(
            "offset-fetch-empty-groups",
            9,
            8,
            _offset_fetch_groups,
            OffsetFetchRequestGroup(group_id="", topics=None),
        ),
        HostileShape(
            "delete-topics-empty-names",
            20,
            3,
            lambda names: DeleteTopicsRequest(topic_names=names, timeout=1000),
            "",
        ),
        HostileShape(
            "delete-topics-empty-names",
            20,
            5,
            lambda names: DeleteTopicsRequest(topic_names=names, timeout=1000),
            "",
        ),
        HostileShape(
            "delete-topics-null-states",
            20,
            6,
            lambda topics: DeleteTopicsRequest(topics=topics, timeout=1000),
            DeleteTopicState(name=None),
        ),
        HostileShape(
            "delete-records-empty-topics",
            21,
            1,
            lambda topics: DeleteRecordsRequest(topics=topics, timeout=1000),
            DeleteRecordsTopic(name="", partitions=[]),
        ),
        HostileShape(
            "delete-records-empty-topics",
            21,
            2,
            lambda topics: DeleteRecordsRequest(topics=topics, timeout=1000),
            DeleteRecordsTopic(name="", partitions=[]),
        ),
        HostileShape(
            "describe-configs-empty-resources",
            32,
            1,
            lambda resources: DescribeConfigsRequest(resources=resources),
            DescribeConfigsResource(resource_type=2, resource_name="", configuration_keys=None),
        ),
        HostileShape(
            "offset-for-leader-epoch-empty-topics",
            23,
            3,
            lambda topics: OffsetForLeaderEpochRequest(replica_id=-1, topics=topics),
            OffsetForLeaderTopic(topic="", partitions=[]),
        ),
        HostileShape(
            "offset-for-leader-epoch-empty-topics",
            23,
            4,
            lambda topics: OffsetForLeaderEpochRequest(replica_id=-1, topics=topics),
            OffsetForLeaderTopic(topic="", partitions=[]),
        ),
        HostileShape(
            "describe-topic-partitions-empty-names",
            75,
            0,
            lambda topics: DescribeTopicPartitionsRequest(
                topics=topics, response_partition_limit=2000
            ),
            TopicRequest(name=""),
        ),
        HostileShape(
            "update-metadata-empty-topics",
            6,
            8,
            lambda topics: UpdateMetadataRequest(topic_states=topics),
            UpdateMetadataTopicState(topic_name=""),
        ),
        HostileShape(
            "describe-configs-empty-resources",
            32,
            4,
            lambda resources: DescribeConfigsRequest(resources=resources),
            DescribeConfigsResource(resource_type=2, resource_name="", configuration_keys=None),
        ),
        # Transactions (issue 18): every request that carries a list of ids, topics or markers.
        HostileShape(
            "add-partitions-to-txn-empty-topics",
            24,
            3,
            lambda topics: AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="t",
                v3_and_below_producer_id=1,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=topics,
            ),
            AddPartitionsToTxnTopic(name="", partitions=[]),
        ),
        HostileShape(
            "add-partitions-to-txn-empty-transactions",
            24,
            5,
            lambda transactions: AddPartitionsToTxnRequest(transactions=transactions),
            AddPartitionsToTxnTransaction(transactional_id="", topics=[]),
        ),
        HostileShape(
            "txn-offset-commit-empty-topics",
            28,
            3,
            lambda topics: TxnOffsetCommitRequest(
                transactional_id="t", group_id="g", producer_id=1, topics=topics
            ),
            TxnOffsetCommitRequestTopic(name="", partitions=[]),
        ),
        HostileShape(
            "describe-transactions-empty-ids",
            65,
            0,
            lambda ids: DescribeTransactionsRequest(transactional_ids=ids),
            "",
        ),
        HostileShape(
            "list-transactions-empty-state-filters",
            66,
            1,
            lambda states: ListTransactionsRequest(state_filters=states),
            "",
        ),
        HostileShape(
            "describe-producers-empty-topics",
            61,
            0,
            lambda topics: DescribeProducersRequest(topics=topics),
            DescribeProducersTopic(name="", partition_indexes=[]),
        ),
        HostileShape(
            "write-txn-markers-empty-markers",
            27,
            1,
            lambda markers: WriteTxnMarkersRequest(markers=markers),
            WritableTxnMarker(producer_id=1, topics=[]),
        ),
    ]


SHAPES: tuple[HostileShape, ...] = tuple(_shapes())
