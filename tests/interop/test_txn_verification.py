"""Partition verification (KIP-890 part 1) on a single node over TCP: the leader asks the
transaction coordinator (in process) before appending a transaction's first batch to a
partition.

A hanging transaction is what it prevents: a transactional batch that arrives after its
transaction was aborted (a zombie: same producer id and epoch, the partition no longer in the
transaction) is refused with INVALID_TXN_STATE and nothing is appended, so the partition's last
stable offset does not stall; a batch to a partition never added is refused the same way; the
next transaction of the producer still writes. With
``transaction.partition.verification.enable=false`` (a dynamic broker config) the zombie is
appended and the last stable offset stays behind it, which is the hanging transaction.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.end_txn import EndTxnRequest
from pydmq.protocol.messages.incremental_alter_configs import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

TOPIC = "verified"
_READ_UNCOMMITTED, _READ_COMMITTED = 0, 1


class _Producer:
    """A transactional producer spoken by hand: its id, epoch and next sequence per
    partition."""

    def __init__(self, raw: RawClient, transactional_id: str) -> None:
        self.raw = raw
        self.transactional_id = transactional_id
        init = raw.request(
            22,
            4,
            InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=60000),
        ).body
        assert init.error_code == E.NONE
        self.producer_id = init.producer_id
        self.epoch = init.producer_epoch
        self.sequences: dict[int, int] = {}

    def add(self, partition: int) -> None:
        body = self.raw.request(
            24,
            3,
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name=TOPIC, partitions=[partition])],
            ),
        ).body
        [topic] = body.results_by_topic_v3_and_below
        assert [p.partition_error_code for p in topic.results_by_partition] == [E.NONE]

    def produce(self, partition: int, value: bytes) -> int:
        """The produce's error code; the sequence moves on when it was appended."""
        sequence = self.sequences.get(partition, 0)
        batch = build_batch(
            [SimpleRecord(None, value)],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        request = ProduceRequest(
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=10_000,
            topic_data=[
                TopicProduceData(
                    name=TOPIC,
                    partition_data=[PartitionProduceData(index=partition, records=batch)],
                )
            ],
        )
        [topic] = self.raw.request(0, 9, request).body.responses
        [answer] = topic.partition_responses
        if answer.error_code == E.NONE:
            self.sequences[partition] = sequence + 1
        return int(answer.error_code)

    def end(self, committed: bool, broker: EmbeddedBroker) -> None:
        ended = self.raw.request(
            26,
            3,
            EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.epoch,
                committed=committed,
            ),
        ).body
        assert ended.error_code == E.NONE
        final = "CompleteCommit" if committed else "CompleteAbort"
        _wait(lambda: self.state() == final, f"the transaction reaches {final}")

    def state(self) -> str:
        body = self.raw.request(
            65, 0, DescribeTransactionsRequest(transactional_ids=[self.transactional_id])
        ).body
        [state] = body.transaction_states
        return str(state.transaction_state)


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within 20 s: {what}")


def _create_topic(raw: RawClient) -> None:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True
    )
    raw.request(3, 9, request)
    assert raw.request(3, 9, request).body.topics[0].error_code == 0


def _latest(raw: RawClient, partition: int, isolation: int) -> int:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsTopic(
                name=TOPIC,
                partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)],
            )
        ],
    )
    [topic] = raw.request(2, 7, request).body.topics
    [answer] = topic.partitions
    assert answer.error_code == E.NONE
    return int(answer.offset)


def _broker(data_dir: Path) -> EmbeddedBroker:
    overrides = {
        "transaction.state.log.num.partitions": 3,
        "num.partitions": 2,
        "transaction.partition.verification.enable": True,
    }
    return EmbeddedBroker(data_dir, overrides=overrides)


def test_a_zombie_batch_after_its_abort_is_refused(tmp_path: Path) -> None:
    with _broker(tmp_path / "data") as broker, RawClient(broker.bootstrap) as raw:
        _create_topic(raw)
        producer = _Producer(raw, "zombie")
        producer.add(0)
        assert producer.produce(0, b"aborted") == E.NONE
        # partition 1 was never added to the transaction
        assert producer.produce(1, b"never-added") == E.INVALID_TXN_STATE
        assert _latest(raw, 1, _READ_UNCOMMITTED) == 0
        producer.end(committed=False, broker=broker)
        # the batch + the ABORT marker; the LSO is the log end
        assert _latest(raw, 0, _READ_UNCOMMITTED) == 2
        assert _latest(raw, 0, _READ_COMMITTED) == 2
        # a zombie: same producer id and epoch, its transaction aborted
        assert producer.produce(0, b"zombie") == E.INVALID_TXN_STATE
        assert _latest(raw, 0, _READ_UNCOMMITTED) == 2
        assert _latest(raw, 0, _READ_COMMITTED) == 2
        # the producer's next transaction writes and commits
        producer.add(0)
        assert producer.produce(0, b"committed") == E.NONE
        assert producer.produce(0, b"committed-again") == E.NONE
        assert _latest(raw, 0, _READ_COMMITTED) == 2  # open
        producer.end(committed=True, broker=broker)
        assert _latest(raw, 0, _READ_UNCOMMITTED) == 5
        assert _latest(raw, 0, _READ_COMMITTED) == 5


def _set_verification(raw: RawClient, value: str) -> None:
    request = IncrementalAlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=4,
                resource_name="",
                configs=[
                    AlterableConfig(
                        name="transaction.partition.verification.enable",
                        config_operation=0,
                        value=value,
                    )
                ],
            )
        ]
    )
    [result] = raw.request(44, 1, request).body.responses
    assert result.error_code == E.NONE, result.error_message


def test_without_verification_the_zombie_hangs_the_partition(tmp_path: Path) -> None:
    """The dynamic config turns verification off (Kafka's escape hatch): the same zombie is
    appended and opens a transaction that no marker ends, holding the LSO back; turned on
    again, the next zombie is refused."""
    with _broker(tmp_path / "data") as broker, RawClient(broker.bootstrap) as raw:
        _create_topic(raw)
        producer = _Producer(raw, "unverified")
        producer.add(0)
        assert producer.produce(0, b"aborted") == E.NONE
        producer.end(committed=False, broker=broker)
        _set_verification(raw, "false")
        assert producer.produce(0, b"zombie") == E.NONE
        assert _latest(raw, 0, _READ_UNCOMMITTED) == 3
        assert _latest(raw, 0, _READ_COMMITTED) == 2  # stalled behind the zombie
        _set_verification(raw, "true")
        assert producer.produce(1, b"zombie") == E.INVALID_TXN_STATE
        assert _latest(raw, 1, _READ_UNCOMMITTED) == 0
