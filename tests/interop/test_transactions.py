"""The transaction coordinator over TCP against a single node: the transactional producers of
confluent-kafka (init, begin, commit, abort, fencing by a second producer of the same id),
kafka-python and aiokafka (init, an empty commit and abort: their transactions cannot hold
records until the partition side of transactions serves transactional produce), the wire
flow of a committed transaction with partitions (AddPartitionsToTxn, EndTxn, the markers
reaching the partition leader, DescribeTransactions, ListTransactions), and a transaction left
in PrepareCommit by a stopped node whose markers are sent again after the restart.

The partition leader's side of the markers is :class:`WriteTxnMarkersTestDouble`, a TEST
DOUBLE registered as the node's handler for api key 27 through the plugin hook (src serves no
WriteTxnMarkers handler on this branch; the real one comes with the partition side of
transactions, and the coordinator reaches it the same way, in process).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.plugins.markers import hookimpl
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.end_txn import EndTxnRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.list_transactions import ListTransactionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


class WriteTxnMarkersTestDouble:
    """TEST DOUBLE of a partition leader's WriteTxnMarkers (api key 27) handler: records
    every marker it is sent and answers ``answer`` for each of its partitions."""

    def __init__(self, answer: int = E.NONE) -> None:
        self.answer = answer
        self._lock = threading.Lock()
        self._markers: list[tuple[int, int, bool, list[tuple[str, int]]]] = []
        self.listeners: set[str] = set()

    @hookimpl
    def pydmq_register_api_handlers(self) -> list[ApiHandlerSpec]:
        return [ApiHandlerSpec(27, 1, 2, self.handle, "WriteTxnMarkers (test double)")]

    def handle(
        self, ctx: RequestContext[Any], request: WriteTxnMarkersRequest
    ) -> WriteTxnMarkersResponse:
        self.listeners.add(ctx.listener)
        results = []
        for marker in request.markers:
            partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            with self._lock:
                self._markers.append(
                    (
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.transaction_result,
                        partitions,
                    )
                )
            results.append(
                WritableTxnMarkerResult(
                    producer_id=marker.producer_id,
                    topics=[
                        WritableTxnMarkerTopicResult(
                            name=t.name,
                            partitions=[
                                WritableTxnMarkerPartitionResult(
                                    partition_index=p, error_code=self.answer
                                )
                                for p in t.partition_indexes
                            ],
                        )
                        for t in marker.topics
                    ],
                )
            )
        return WriteTxnMarkersResponse(markers=results)

    @property
    def markers(self) -> list[tuple[int, int, bool, list[tuple[str, int]]]]:
        with self._lock:
            return list(self._markers)


def _broker(data_dir: Path, double: WriteTxnMarkersTestDouble) -> EmbeddedBroker:
    overrides = {"transaction.state.log.num.partitions": 5, "num.partitions": 2}
    return EmbeddedBroker(data_dir, overrides=overrides, plugins=[double])


@pytest.fixture
def double() -> WriteTxnMarkersTestDouble:
    return WriteTxnMarkersTestDouble()


@pytest.fixture
def broker(tmp_path: Path, double: WriteTxnMarkersTestDouble) -> Iterator[EmbeddedBroker]:
    with _broker(tmp_path / "data", double) as b:
        yield b


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within 20 s: {what}")


def _describe(bootstrap: str, transactional_id: str) -> Any:
    with RawClient(bootstrap) as raw:
        body = raw.request(
            65, 0, DescribeTransactionsRequest(transactional_ids=[transactional_id])
        ).body
    [state] = body.transaction_states
    return state


def test_confluent_kafka_transactional_producer(broker: EmbeddedBroker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-txn"}
    producer = ck.Producer(conf)
    producer.init_transactions(30)
    state = _describe(broker.bootstrap, "ck-txn")
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 0)
    producer_id = state.producer_id
    producer.begin_transaction()
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.abort_transaction(30)
    # a second producer of the same id bumps the epoch: the first is fenced
    second = ck.Producer(conf)
    second.init_transactions(30)
    state = _describe(broker.bootstrap, "ck-txn")
    assert (state.producer_id, state.producer_epoch) == (producer_id, 1)
    second.begin_transaction()
    second.abort_transaction(30)


def test_kafka_python_transactional_producer(broker: EmbeddedBroker) -> None:
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-txn")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.commit_transaction()
        producer.begin_transaction()
        producer.abort_transaction()
    finally:
        producer.close()
    state = _describe(broker.bootstrap, "kp-txn")
    assert (state.error_code, state.producer_epoch) == (0, 0)


def test_aiokafka_transactional_producer(broker: EmbeddedBroker) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def scenario() -> None:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, transactional_id="aio-txn"
        )
        await producer.start()
        try:
            async with producer.transaction():
                pass
            await producer.begin_transaction()
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert _describe(broker.bootstrap, "aio-txn").error_code == 0


def _topic(raw: RawClient, name: str) -> None:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=True
    )
    raw.request(3, 9, request)
    assert raw.request(3, 9, request).body.topics[0].error_code == 0


def _begin_and_commit(raw: RawClient, transactional_id: str) -> tuple[int, int]:
    found = raw.request(
        10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id])
    ).body
    assert [c.error_code for c in found.coordinators] == [0]
    init = raw.request(
        22,
        4,
        InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=60000),
    ).body
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    _topic(raw, "txn-topic")
    _topic(raw, "txn-other")
    added = raw.request(
        24,
        3,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name="txn-topic", partitions=[0, 1])],
        ),
    ).body
    codes = [
        p.partition_error_code
        for t in added.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [0, 0]
    # the v4+ form brokers send: verify_only adds nothing, answers per partition
    verified = raw.request(
        24,
        5,
        AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=pid,
                    producer_epoch=epoch,
                    verify_only=True,
                    topics=[
                        AddPartitionsToTxnTopic(name="txn-topic", partitions=[1]),
                        AddPartitionsToTxnTopic(name="txn-other", partitions=[0]),
                    ],
                )
            ]
        ),
    ).body
    [result] = verified.results_by_transaction
    assert [
        (t.name, p.partition_index, p.partition_error_code)
        for t in result.topic_results
        for p in t.results_by_partition
    ] == [("txn-topic", 1, E.NONE), ("txn-other", 0, E.INVALID_TXN_STATE)]
    ended = raw.request(
        26,
        3,
        EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        ),
    ).body
    assert ended.error_code == 0
    return pid, epoch


def test_a_committed_transaction_sends_its_markers(
    broker: EmbeddedBroker, double: WriteTxnMarkersTestDouble
) -> None:
    with RawClient(broker.bootstrap) as raw:
        pid, epoch = _begin_and_commit(raw, "wire-txn")
    _wait(
        lambda: _describe(broker.bootstrap, "wire-txn").transaction_state == "CompleteCommit",
        "the commit completes",
    )
    assert double.markers == [(pid, epoch, True, [("txn-topic", 0), ("txn-topic", 1)])]
    assert double.listeners == {""}  # dispatched in process: no listener
    with RawClient(broker.bootstrap) as raw:
        listed = raw.request(66, 1, ListTransactionsRequest(state_filters=["CompleteCommit"])).body
    assert [(t.transactional_id, t.producer_id) for t in listed.transaction_states] == [
        ("wire-txn", pid)
    ]
    with RawClient(broker.bootstrap) as raw:
        by_pattern = raw.request(
            66, 2, ListTransactionsRequest(transactional_id_pattern="wire-.*")
        ).body
        refused = raw.request(66, 2, ListTransactionsRequest(transactional_id_pattern="(")).body
    assert [t.transactional_id for t in by_pattern.transaction_states] == ["wire-txn"]
    assert refused.error_code == E.INVALID_REGULAR_EXPRESSION


def test_a_prepare_commit_resumes_its_markers_after_a_restart(tmp_path: Path) -> None:
    refusing = WriteTxnMarkersTestDouble(answer=E.NOT_LEADER_OR_FOLLOWER)
    with _broker(tmp_path / "data", refusing) as first:
        with RawClient(first.bootstrap) as raw:
            pid, epoch = _begin_and_commit(raw, "restart-txn")
        _wait(lambda: len(refusing.markers) >= 2, "the markers are retried")
        assert _describe(first.bootstrap, "restart-txn").transaction_state == "PrepareCommit"
    answering = WriteTxnMarkersTestDouble()
    with _broker(tmp_path / "data", answering) as second:
        _wait(
            lambda: (
                _describe(second.bootstrap, "restart-txn").transaction_state == "CompleteCommit"
            ),
            "the commit completes after the restart",
        )
    assert answering.markers[0] == (pid, epoch, True, [("txn-topic", 0), ("txn-topic", 1)])


def test_wire_errors_by_version(broker: EmbeddedBroker) -> None:
    """KIP-588: PRODUCER_FENCED from InitProducerId v4, AddPartitionsToTxn, AddOffsetsToTxn and
    EndTxn v2; INVALID_PRODUCER_EPOCH before. An unknown topic fails only its partitions; the
    others are not attempted."""
    from pydmq.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest

    with RawClient(broker.bootstrap) as raw:
        _topic(raw, "txn-topic")
        first = raw.request(
            22, 4, InitProducerIdRequest(transactional_id="v", transaction_timeout=60000)
        ).body
        pid = first.producer_id
        raw.request(22, 4, InitProducerIdRequest(transactional_id="v", transaction_timeout=60000))
        stale = InitProducerIdRequest(
            transactional_id="v", transaction_timeout=60000, producer_id=pid, producer_epoch=5
        )
        assert raw.request(22, 3, stale).body.error_code == E.INVALID_PRODUCER_EPOCH
        assert raw.request(22, 4, stale).body.error_code == E.PRODUCER_FENCED
        ended = EndTxnRequest(transactional_id="v", producer_id=pid, producer_epoch=0)
        assert raw.request(26, 1, ended).body.error_code == E.INVALID_PRODUCER_EPOCH
        assert raw.request(26, 2, ended).body.error_code == E.PRODUCER_FENCED
        offsets = AddOffsetsToTxnRequest(
            transactional_id="v", producer_id=pid, producer_epoch=0, group_id="g"
        )
        assert raw.request(25, 1, offsets).body.error_code == E.INVALID_PRODUCER_EPOCH
        assert raw.request(25, 2, offsets).body.error_code == E.PRODUCER_FENCED
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="v",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=1,
            v3_and_below_topics=[
                AddPartitionsToTxnTopic(name="txn-topic", partitions=[0]),
                AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0]),
            ],
        )
        body = raw.request(24, 3, add).body
        assert [
            (t.name, p.partition_error_code)
            for t in body.results_by_topic_v3_and_below
            for p in t.results_by_partition
        ] == [
            ("txn-topic", E.OPERATION_NOT_ATTEMPTED),
            ("no-such-topic", E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert _describe(broker.bootstrap, "v").transaction_state == "Empty"
