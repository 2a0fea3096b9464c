"""Fetch sessions (KIP-227), topic ids (v13+) and long polls, through raw Fetch requests."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from pydmq.client import KafkaClient
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.testing import EmbeddedBroker

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "sessions"


@pytest.fixture
def broker(tmp_path: Path):  # type: ignore[no-untyped-def]
    with EmbeddedBroker(tmp_path / "d", overrides={"num.partitions": 3}) as b:
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        for partition in range(3):
            producer.produce(TOPIC, value=b"first", partition=partition)
        assert producer.flush(10) == 0
        yield b


def _produce(bootstrap: str, partition: int, value: bytes) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    producer.produce(TOPIC, value=value, partition=partition)
    assert producer.flush(10) == 0


def _fetch(
    client: KafkaClient,
    version: int,
    session_id: int,
    epoch: int,
    partitions: dict[int, int],
    forgotten: list[int] | None = None,
    topic_id: uuid.UUID | None = None,
    max_wait: int = 0,
) -> FetchResponse:
    tid = topic_id or client.topic_id(TOPIC)
    request = FetchRequest(
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic=TOPIC,
                topic_id=tid,
                partitions=[
                    FetchPartition(
                        partition=p,
                        fetch_offset=o,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                        log_start_offset=-1,
                    )
                    for p, o in partitions.items()
                ],
            )
        ]
        if partitions
        else [],
        forgotten_topics_data=[ForgottenTopic(topic=TOPIC, topic_id=tid, partitions=forgotten)]
        if forgotten
        else [],
    )
    response: FetchResponse = client.send(1, request, version=version)
    return response


def _partitions(response: FetchResponse) -> dict[int, int]:
    """partition -> number of records returned."""
    out: dict[int, int] = {}
    for topic in response.responses:
        for p in topic.partitions:
            records = p.records or b""
            out[p.partition_index] = sum(h.records_count for h in iter_batch_headers(records))
    return out


@pytest.mark.parametrize("version", [7, 12, 13, 17])
def test_incremental_session_lifecycle(broker: EmbeddedBroker, version: int) -> None:
    with KafkaClient(broker.bootstrap) as client:
        full = _fetch(client, version, 0, 0, {0: 0, 1: 0})
        assert full.error_code == 0 and full.session_id != 0
        assert _partitions(full) == {0: 1, 1: 1}
        sid = full.session_id
        # the client moved its positions; nothing new: the response names no partition
        assert _partitions(_fetch(client, version, sid, 1, {0: 1, 1: 1})) == {}
        # new data on partition 0 only; positions unchanged, so the request names none
        _produce(broker.bootstrap, 0, b"second")
        assert _partitions(_fetch(client, version, sid, 2, {})) == {0: 1}
        # move partition 0, add partition 2, forget partition 1
        inc = _fetch(client, version, sid, 3, {0: 2, 2: 0}, forgotten=[1])
        assert _partitions(inc) == {2: 1}
        _produce(broker.bootstrap, 1, b"unseen")  # forgotten: must not come back
        assert _partitions(_fetch(client, version, sid, 4, {2: 1})) == {}
        # a wrong epoch and an unknown session are whole-response errors
        assert (
            _fetch(client, version, sid, 9, {}).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        )
        assert (
            _fetch(client, version, sid + 12345, 1, {}).error_code
            == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        # close the session: a sessionless full fetch, then the id is gone
        closed = _fetch(client, version, sid, -1, {0: 0})
        assert closed.error_code == 0 and closed.session_id == 0 and _partitions(closed) == {0: 2}
        assert (
            _fetch(client, version, sid, 5, {}).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )


def test_unknown_topic_id_from_v13(broker: EmbeddedBroker) -> None:
    with KafkaClient(broker.bootstrap) as client:
        response = _fetch(client, 13, 0, -1, {0: 0}, topic_id=uuid.uuid4())
        errors = [p.error_code for t in response.responses for p in t.partitions]
        assert errors == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_long_poll_is_woken_by_an_append(broker: EmbeddedBroker) -> None:
    with KafkaClient(broker.bootstrap) as client:
        started = time.monotonic()
        timer = threading.Timer(0.5, _produce, (broker.bootstrap, 2, b"late"))
        timer.start()
        response = _fetch(client, 12, 0, -1, {2: 1}, max_wait=10_000)
        elapsed = time.monotonic() - started
        timer.join()
        assert _partitions(response) == {2: 1}
        assert elapsed < 8, f"long poll not woken by the append ({elapsed:.1f} s)"


def test_long_poll_times_out_empty(broker: EmbeddedBroker) -> None:
    with KafkaClient(broker.bootstrap) as client:
        started = time.monotonic()
        response = _fetch(client, 12, 0, -1, {2: 1}, max_wait=300)
        assert time.monotonic() - started >= 0.25
        assert _partitions(response) == {2: 0}


def test_fetch_inside_a_batch_returns_the_whole_batch(broker: EmbeddedBroker) -> None:
    batch = build_batch([SimpleRecord(None, b"r%d" % i, (), None) for i in range(10)])
    with KafkaClient(broker.bootstrap) as client:
        from pydmq.protocol.messages.produce import (
            PartitionProduceData,
            ProduceRequest,
            TopicProduceData,
        )

        produced = client.send(
            0,
            ProduceRequest(
                acks=-1,
                timeout=5000,
                topic_data=[
                    TopicProduceData(
                        name=TOPIC, partition_data=[PartitionProduceData(index=2, records=batch)]
                    )
                ],
            ),
        )
        base = produced.responses[0].partition_responses[0].base_offset
        for inner in (base, base + 4, base + 9):
            response = _fetch(client, 12, 0, -1, {2: inner})
            records = response.responses[0].partitions[0].records
            headers = list(iter_batch_headers(records))
            assert headers[0].base_offset == base and headers[0].records_count == 10
