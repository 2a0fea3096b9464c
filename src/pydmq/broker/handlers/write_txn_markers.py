"""WriteTxnMarkers (key 27), v1-v2: the transaction coordinator writes COMMIT/ABORT markers.

Only a transaction coordinator sends it: in cluster mode over the inter-broker listener to
each partition's leader, on a single node in process (the request dispatched to this handler
with the in-process listener name ""). Nothing authenticates a peer, so a request that
arrives on any other listener gets CLUSTER_AUTHORIZATION_FAILED for every partition (what
Kafka answers when the CLUSTER_ACTION permission is missing): a client cannot forge markers.

Per marker and partition: a ``__consumer_offsets`` partition completes the group
coordinator's pending transactional offsets (:func:`complete_group_transaction`, the one
routing point); any other partition gets one control batch through
:meth:`~pydmq.replication.replica_manager.ReplicaManager.append_txn_markers` with ``acks=-1``
(errors and waits in :mod:`pydmq.replication.txn_markers`), waiting at most Kafka's
``request.timeout.ms`` default (30 s). A partition named twice in one marker is answered
once per occurrence. v2 (KIP-890) adds ``transaction_version``: a marker of transactions v2 must
carry an epoch above the producer's (its coordinator bumped it), so a late or duplicate
marker at the epoch of the producer's next, open transaction is INVALID_PRODUCER_EPOCH
instead of ending it. Decode budget: 110,000 elements (a coordinator completing thousands of
transactions at once on one leader, :mod:`pydmq.protocol.budgets`); the appends of one
request are not sliced.

With an authorizer, a request over the inter-broker listener also needs ALTER or
CLUSTER_ACTION on the cluster (as Kafka: the coordinator's broker principal).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.write_txn_markers import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopic,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from pydmq.replication.txn_markers import TxnMarkerEntry
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER", "IN_PROCESS_LISTENER", "complete_group_transaction"]

# The listener name of a request dispatched in process (no connection).
IN_PROCESS_LISTENER = ""
# Kafka's request.timeout.ms default: how long a marker's acks=-1 append may wait.
MARKER_TIMEOUT_MS = 30_000
_OFFSETS_TOPIC = "__consumer_offsets"
_COMMIT = True


def complete_group_transaction(
    ctx: BrokerContext,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    transaction_version: int,
) -> Awaitable[int]:
    """End a transaction on ``__consumer_offsets`` partition ``partition``: the group
    coordinator appends the marker through its shard (after the shard's earlier writes) and
    replays it, committing or dropping the producer's pending offsets; resolves to a Kafka
    error code."""
    return ctx.broker.group_coordinator.complete_transaction(
        partition, producer_id, producer_epoch, coordinator_epoch, committed, transaction_version
    )


def _authorized(ctx: BrokerContext) -> bool:
    listener = ctx.listener
    if listener == IN_PROCESS_LISTENER:
        return True
    return listener == ctx.broker.inter_broker_listener and (
        authorized_cluster(ctx, AclOperation.ALTER)
        or authorized_cluster(ctx, AclOperation.CLUSTER_ACTION)
    )


def handle(
    ctx: BrokerContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse | Awaitable[WriteTxnMarkersResponse]:
    response = WriteTxnMarkersResponse()
    if not _authorized(ctx):
        for marker in request.markers:
            response.markers.append(_answered(marker.producer_id, marker.topics))
        return response
    entries: list[TxnMarkerEntry] = []
    # Where each answer goes: the partition result and the entry or group write filling it.
    answers: list[tuple[WritableTxnMarkerPartitionResult, TxnMarkerEntry | Awaitable[int]]] = []
    for marker in request.markers:
        result = WritableTxnMarkerResult(producer_id=marker.producer_id)
        response.markers.append(result)
        commit = marker.transaction_result == _COMMIT
        version = marker.transaction_version if ctx.api_version >= 2 else 0
        for topic in marker.topics:
            topic_result = WritableTxnMarkerTopicResult(name=topic.name)
            result.topics.append(topic_result)
            for index in topic.partition_indexes:
                partition_result = WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=ErrorCode.NONE
                )
                topic_result.partitions.append(partition_result)
                if topic.name == _OFFSETS_TOPIC:
                    answers.append(
                        (
                            partition_result,
                            complete_group_transaction(
                                ctx,
                                index,
                                marker.producer_id,
                                marker.producer_epoch,
                                marker.coordinator_epoch,
                                commit,
                                version,
                            ),
                        )
                    )
                    continue
                entry = TxnMarkerEntry(
                    TopicPartition(topic.name, index),
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                    commit,
                    version,
                )
                entries.append(entry)
                answers.append((partition_result, entry))
    waiting = ctx.broker.replica_manager.append_txn_markers(entries, MARKER_TIMEOUT_MS)
    if waiting is None and all(isinstance(a, TxnMarkerEntry) for _, a in answers):
        _fill(answers, [])
        return response
    return _respond_later(response, answers, waiting)


def _fill(
    answers: list[tuple[WritableTxnMarkerPartitionResult, TxnMarkerEntry | Awaitable[int]]],
    group_codes: list[int],
) -> None:
    codes = iter(group_codes)
    for partition_result, answer in answers:
        if isinstance(answer, TxnMarkerEntry):
            partition_result.error_code = answer.error_code
        else:
            partition_result.error_code = next(codes)


async def _respond_later(
    response: WriteTxnMarkersResponse,
    answers: list[tuple[WritableTxnMarkerPartitionResult, TxnMarkerEntry | Awaitable[int]]],
    waiting: Awaitable[None] | None,
) -> WriteTxnMarkersResponse:
    group_writes = [a for _, a in answers if not isinstance(a, TxnMarkerEntry)]
    group_codes = list(await asyncio.gather(*group_writes)) if group_writes else []
    if waiting is not None:
        await waiting
    _fill(answers, group_codes)
    return response


def _answered(producer_id: int, topics: list[WritableTxnMarkerTopic]) -> WritableTxnMarkerResult:
    """Every partition of one marker answered CLUSTER_AUTHORIZATION_FAILED."""
    return WritableTxnMarkerResult(
        producer_id=producer_id,
        topics=[
            WritableTxnMarkerTopicResult(
                name=topic.name,
                partitions=[
                    WritableTxnMarkerPartitionResult(
                        partition_index=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    )
                    for index in topic.partition_indexes
                ],
            )
            for topic in topics
        ],
    )


HANDLER = ApiHandlerSpec(27, 1, 2, handle, "WriteTxnMarkers")
