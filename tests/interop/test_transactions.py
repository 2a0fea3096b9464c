"""The transaction coordinator over TCP against a single node: the transactional producers of
confluent-kafka (records committed and aborted, read back by read_committed and
read_uncommitted consumers, fencing by a second producer of the same id), kafka-python and
aiokafka, the wire flow of a committed transaction with partitions (AddPartitionsToTxn, EndTxn,
the markers reaching each partition, DescribeTransactions, ListTransactions), and a transaction
left in PrepareCommit by a stopped node whose markers are sent again after the restart.

The markers are dispatched in process to the node's own WriteTxnMarkers handler; the restart
test makes the partition side refuse them on the first run by patching
``ReplicaManager.append_txn_markers`` of the in-process broker (``monkeypatch``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

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
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.list_transactions import ListTransactionsRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.storage.api import TopicPartition
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


def _broker(data_dir: Path) -> EmbeddedBroker:
    overrides = {"transaction.state.log.num.partitions": 5, "num.partitions": 2}
    return EmbeddedBroker(data_dir, overrides=overrides)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with _broker(tmp_path / "data") as b:
        yield b


def _log_end_offsets(bootstrap: str, topic: str, partitions: int, isolation: int) -> list[int]:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsPartition(partition_index=p, timestamp=-1) for p in range(partitions)
                ],
            )
        ],
    )
    with RawClient(bootstrap) as raw:
        [answer] = raw.request(2, 7, request).body.topics
    assert [p.error_code for p in answer.partitions] == [0] * partitions
    return [p.offset for p in answer.partitions]


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


def _read_all(ck: Any, bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(2)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == ck.KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
    finally:
        consumer.close()
    assert len(at_end) == 2, "the consumer did not reach the end of both partitions"
    return sorted(values)


def test_confluent_kafka_transactional_producer(broker: EmbeddedBroker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-txn"}
    producer = ck.Producer(conf)
    producer.init_transactions(30)
    state = _describe(broker.bootstrap, "ck-txn")
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 0)
    producer_id = state.producer_id
    producer.begin_transaction()
    for i in range(4):
        producer.produce("ck-topic", b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("ck-topic", b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    # a second producer of the same id bumps the epoch: the first is fenced
    second = ck.Producer(conf)
    second.init_transactions(30)
    state = _describe(broker.bootstrap, "ck-txn")
    assert (state.producer_id, state.producer_epoch) == (producer_id, 1)
    second.begin_transaction()
    second.produce("ck-topic", b"second", partition=0)
    second.commit_transaction(30)
    committed = sorted([b"committed-%d" % i for i in range(4)] + [b"second"])
    assert _read_all(ck, broker.bootstrap, "ck-topic", "read_committed") == committed
    aborted = [b"aborted-%d" % i for i in range(4)]
    assert _read_all(ck, broker.bootstrap, "ck-topic", "read_uncommitted") == sorted(
        committed + aborted
    )


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


def test_a_committed_transaction_sends_its_markers(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as raw:
        pid, _ = _begin_and_commit(raw, "wire-txn")
    _wait(
        lambda: _describe(broker.bootstrap, "wire-txn").transaction_state == "CompleteCommit",
        "the commit completes",
    )
    # one COMMIT marker in each partition of the transaction, none elsewhere
    assert _log_end_offsets(broker.bootstrap, "txn-topic", 2, 0) == [1, 1]
    assert _log_end_offsets(broker.bootstrap, "txn-topic", 2, 1) == [1, 1]
    assert _log_end_offsets(broker.bootstrap, "txn-other", 2, 0) == [0, 0]
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


def test_a_prepare_commit_resumes_its_markers_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydmq.replication.replica_manager import ReplicaManager

    refused: list[TopicPartition] = []

    def refuse(self: ReplicaManager, entries: list[Any], timeout_ms: int) -> None:
        for entry in entries:
            refused.append(entry.tp)
            entry.error_code = E.NOT_LEADER_OR_FOLLOWER

    with monkeypatch.context() as patched:
        patched.setattr(ReplicaManager, "append_txn_markers", refuse)
        with _broker(tmp_path / "data") as first:
            with RawClient(first.bootstrap) as raw:
                _begin_and_commit(raw, "restart-txn")
            _wait(lambda: len(refused) >= 4, "the markers are retried")
            assert _describe(first.bootstrap, "restart-txn").transaction_state == "PrepareCommit"
            assert _log_end_offsets(first.bootstrap, "txn-topic", 2, 0) == [0, 0]
    with _broker(tmp_path / "data") as second:
        _wait(
            lambda: (
                _describe(second.bootstrap, "restart-txn").transaction_state == "CompleteCommit"
            ),
            "the commit completes after the restart",
        )
        assert _log_end_offsets(second.bootstrap, "txn-topic", 2, 0) == [1, 1]


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
