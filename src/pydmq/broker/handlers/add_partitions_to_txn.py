"""AddPartitionsToTxn (key 24), v0-v5.

v0-v3, the client form: one transactional id, its producer id and epoch, and the partitions
to add to its ongoing transaction (the first add starts it), answered per partition with one
code from the transaction coordinator: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (answered
INVALID_PRODUCER_EPOCH below v2, KIP-588), CONCURRENT_TRANSACTIONS while the previous
transaction completes, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS. As Kafka's, a partition
of a topic this broker does not know is UNKNOWN_TOPIC_OR_PARTITION and then the others are
OPERATION_NOT_ATTEMPTED (nothing is added).
v4+, the batched form brokers send (KIP-890): several transactions, each answered on its own;
with ``verify_only`` nothing is added, each partition answers NONE if it is in the ongoing
transaction, else INVALID_TXN_STATE (a partition leader checking a transactional produce).
v5 is what transactions v2 brokers send: without ``verify_only`` the leader of a Produce v12
(or the group coordinator of a TxnOffsetCommit v5) adds its partition to the transaction
itself, since a transactions v2 client sends no AddPartitionsToTxn (KIP-890 part 2); the
transaction records the client's version 2.

Authorization (as Kafka): v4+ comes from brokers and needs CLUSTER_ACTION (else a
top-level CLUSTER_AUTHORIZATION_FAILED); v0-v3 need WRITE on the transactional id (else
every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (else
TOPIC_AUTHORIZATION_FAILED, the other partitions OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster, authorized_names
from pydmq.broker.handlers._transactions import (
    TXN_ID_DENIED,
    coordinator,
    fenced_as,
    txn_id_denied,
)
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
)
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

_BATCHED_VERSION = 4
_ADD_VERSION = 5


async def handle(
    ctx: BrokerContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    if ctx.api_version < _BATCHED_VERSION:
        if txn_id_denied(ctx, request.v3_and_below_transactional_id):
            codes = _every(request.v3_and_below_topics, TXN_ID_DENIED)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(codes))
        codes = await _add(
            ctx,
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            request.v3_and_below_topics,
            verify_only=False,
        )
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(codes))
    if not authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    results = []
    for txn in request.transactions:
        codes = await _add(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.topics,
            verify_only=txn.verify_only,
        )
        results.append(
            AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_by_topic(codes)
            )
        )
    return AddPartitionsToTxnResponse(results_by_transaction=results)


async def _add(
    ctx: BrokerContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    topics: Sequence[AddPartitionsToTxnTopic],
    *,
    verify_only: bool,
) -> dict[TopicPartition, int]:
    partitions = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    writable = authorized_names(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in topics)
    )
    refused = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in partitions if tp.topic not in writable
    }
    refused.update(
        (tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for tp in partitions
        if tp not in refused and not _exists(ctx, tp)
    )
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    txn_coordinator = coordinator(ctx)
    if verify_only:
        return txn_coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
    code = await txn_coordinator.add_partitions(
        transactional_id,
        producer_id,
        producer_epoch,
        partitions,
        # v5 from a broker: a transactions v2 produce's partition (KIP-890 part 2)
        transaction_version=2 if ctx.api_version >= _ADD_VERSION else 0,
    )
    return dict.fromkeys(partitions, fenced_as(code, ctx.api_version, 2))


def _every(topics: Sequence[AddPartitionsToTxnTopic], code: int) -> dict[TopicPartition, int]:
    return {TopicPartition(t.name, p): code for t in topics for p in t.partitions}


def _exists(ctx: BrokerContext, tp: TopicPartition) -> bool:
    topic = ctx.broker.topics.get(tp.topic)
    return topic is not None and any(p.index == tp.partition for p in topic.partitions)


def _by_topic(codes: dict[TopicPartition, int]) -> list[AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            AddPartitionsToTxnPartitionResult(
                partition_index=tp.partition, partition_error_code=code
            )
        )
    return [
        AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
        for name, results in by_topic.items()
    ]


HANDLER = ApiHandlerSpec(24, 0, 5, handle, "AddPartitionsToTxn")
