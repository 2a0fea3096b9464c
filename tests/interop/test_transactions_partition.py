"""The partition side of transactions over real TCP, driven without a transaction coordinator.

A transactional Produce with a producer id and epoch chosen here, COMMIT/ABORT markers sent
as the transaction coordinator of a single node sends them (WriteTxnMarkers dispatched in
process to the handler served for key 27), then read_committed reads: a raw Fetch
(last stable offset, aborted transactions), ListOffsets by isolation level, DescribeProducers,
and confluent-kafka consumers of both isolation levels. WriteTxnMarkers from a client
connection is refused with CLUSTER_AUTHORIZATION_FAILED. Without a coordinator, partition
verification (KIP-890, ``transaction.partition.verification.enable``) is off.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.api.handler import RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pydmq.protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.protocol.records import SimpleRecord, build_batch, decode_records, iter_batch_headers
from pydmq.testing.embedded import EmbeddedBroker
from support.raw_client import RawClient, decode_response_frame

pytestmark = pytest.mark.timeout(120)
confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "txn-partition"
P1, P2 = 1000, 2000
COORDINATOR_EPOCH = 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    from confluent_kafka.admin import AdminClient, NewTopic

    data: Path = tmp_path_factory.mktemp("txn-data")
    overrides = {"transaction.partition.verification.enable": False}
    with EmbeddedBroker(data, overrides=overrides) as embedded:
        admin = AdminClient({"bootstrap.servers": embedded.bootstrap})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        yield embedded


def produce(client: RawClient, records: list[bytes], pid: int, seq: int, txn: bool) -> int:
    batch = build_batch(
        [SimpleRecord(None, value) for value in records],
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=txn,
    )
    request = ProduceRequest(
        transactional_id="chosen-txn" if txn else None,
        acks=-1,
        timeout=5_000,
        topic_data=[
            TopicProduceData(
                name=TOPIC, partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    answer = client.request(0, 9, request).body.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
    return int(answer.base_offset)


def markers_request(pid: int, commit: bool) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=0,
                transaction_result=commit,
                topics=[WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
                coordinator_epoch=COORDINATOR_EPOCH,
            )
        ]
    )


def write_marker(broker: EmbeddedBroker, pid: int, commit: bool) -> int:
    """What a single node's transaction coordinator does: dispatch the request in process to
    the handler of key 27; the partition's error code."""
    node_broker: Any = broker.broker

    async def send() -> WriteTxnMarkersResponse:
        spec = node_broker.dispatcher.handlers[27]
        ctx = RequestContext(node_broker.services, 27, 1, 0, "txn-coordinator", "", 0, "", 0)
        result = spec.handle(ctx, markers_request(pid, commit))
        if inspect.isawaitable(result):
            result = await result
        assert isinstance(result, WriteTxnMarkersResponse)
        return result

    response = broker.run_on_loop(send, 10)
    return int(response.markers[0].topics[0].partitions[0].error_code)


def fetch(client: RawClient, isolation_level: int) -> Any:
    request = fetch_request(isolation_level)
    return client.request(1, 12, request).body.responses[0].partitions[0]


def fetch_request(
    isolation_level: int, fetch_offset: int = 0, max_wait: int = 0, min_bytes: int = 0
) -> FetchRequest:
    return FetchRequest(
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=TOPIC,
                partitions=[
                    FetchPartition(
                        partition=0,
                        fetch_offset=fetch_offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                        log_start_offset=-1,
                    )
                ],
            )
        ],
    )


def latest(client: RawClient, isolation_level: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[
                    ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
                ],
            )
        ],
    )
    return int(client.request(2, 7, request).body.topics[0].partitions[0].offset)


def consume(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{isolation}-{expected}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 20
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        # nothing more than expected arrives
        msg = consumer.poll(1.0)
        assert msg is None or msg.error(), msg.value()
    finally:
        consumer.close()
    return values


def test_transactions_on_the_partition_side(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as client:
        assert produce(client, [b"a0", b"a1"], P1, 0, txn=True) == 0
        assert write_marker(broker, P1, commit=False) == ErrorCode.NONE  # offset 2
        assert produce(client, [b"c0", b"c1"], P1, 2, txn=True) == 3
        assert write_marker(broker, P1, commit=True) == ErrorCode.NONE  # offset 5
        assert produce(client, [b"o0"], P2, 0, txn=True) == 6  # stays open for now
        assert produce(client, [b"p0"], -1, -1, txn=False) == 7

        # A client cannot forge markers.
        forged = client.request(27, 1, markers_request(P2, True)).body
        assert forged.markers[0].topics[0].partitions[0].error_code == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        )

        committed = fetch(client, 1)
        assert (committed.high_watermark, committed.last_stable_offset) == (8, 6)
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [
            (P1, 0)
        ]
        data = bytes(committed.records)
        headers = list(iter_batch_headers(data))
        assert [h.base_offset for h in headers] == [0, 2, 3, 5]  # below the LSO only
        assert [h.is_control for h in headers] == [False, True, False, True]
        uncommitted = fetch(client, 0)
        assert uncommitted.last_stable_offset == 6 and uncommitted.aborted_transactions is None
        values = [
            r.value
            for h in iter_batch_headers(bytes(uncommitted.records))
            if not h.is_control
            for r in decode_records(bytes(uncommitted.records), h)
        ]
        assert values == [b"a0", b"a1", b"c0", b"c1", b"o0", b"p0"]
        assert (latest(client, 1), latest(client, 0)) == (6, 8)

        described = (
            client.request(
                61,
                0,
                DescribeProducersRequest(topics=[TopicRequest(name=TOPIC, partition_indexes=[0])]),
            )
            .body.topics[0]
            .partitions[0]
        )
        producers = {
            p.producer_id: (
                p.producer_epoch,
                p.last_sequence,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
            for p in described.active_producers
        }
        assert producers == {P1: (0, 3, COORDINATOR_EPOCH, -1), P2: (0, 0, -1, 6)}

    assert consume(broker.bootstrap, "read_committed", 2) == [b"c0", b"c1"]
    assert consume(broker.bootstrap, "read_uncommitted", 6) == [
        b"a0",
        b"a1",
        b"c0",
        b"c1",
        b"o0",
        b"p0",
    ]
    with RawClient(broker.bootstrap, timeout=20) as client:
        # A read_committed long poll at the LSO wakes when the marker moves the LSO.
        parked = fetch_request(1, fetch_offset=6, max_wait=15_000, min_bytes=1)
        correlation_id = client.send_request_no_response(1, 12, parked)
        assert write_marker(broker, P2, commit=True) == ErrorCode.NONE
        frame = client.read_frame(10)  # answered within 10 s: woken, not expired
        assert frame is not None
        woken = decode_response_frame(frame, 1, 12)
        assert woken.correlation_id == correlation_id
        answer = woken.body.responses[0].partitions[0]
        assert (answer.last_stable_offset, answer.aborted_transactions) == (9, [])
        assert [h.base_offset for h in iter_batch_headers(bytes(answer.records))] == [6, 7, 8]
    assert consume(broker.bootstrap, "read_committed", 4) == [b"c0", b"c1", b"o0", b"p0"]


def test_marker_and_produce_refusals(broker: EmbeddedBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic("txn-fenced", 1, 1)]).values():
        future.result(10)
    node_broker: Any = broker.broker

    def markers(topic: str, pid: int, epoch: int, coordinator_epoch: int) -> list[int]:
        request = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=False,
                    topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0, 5])],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )

        async def send() -> WriteTxnMarkersResponse:
            ctx = RequestContext(node_broker.services, 27, 2, 0, "txn-coordinator", "", 0, "", 0)
            result = node_broker.dispatcher.handlers[27].handle(ctx, request)
            return await result if inspect.isawaitable(result) else result  # type: ignore[no-any-return]

        response = broker.run_on_loop(send, 10)
        return [p.error_code for p in response.markers[0].topics[0].partitions]

    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert markers("no-such-topic", 7, 0, 0) == [unknown, unknown]
    assert markers("txn-fenced", 7, 3, 2) == [ErrorCode.NONE, unknown]
    assert markers("txn-fenced", 7, 2, 2)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert markers("txn-fenced", 7, 3, 1)[0] == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert markers("txn-fenced", 7, 4, 2)[0] == ErrorCode.NONE  # a newer epoch is fine

    batch = build_batch(
        [SimpleRecord(None, b"x")],
        producer_id=8,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    request = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=5_000,
        topic_data=[
            TopicProduceData(
                name="txn-fenced", partition_data=[PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    with RawClient(broker.bootstrap) as client:
        answer = client.request(0, 9, request).body.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
