"""TxnOffsetCommit (key 28), v0-v5.

Offsets a transactional producer commits for a consumer group inside its transaction
(``sendOffsetsToTransaction``, KIP-98; the group's identity from v3, KIP-447). They are
written to the group's ``__consumer_offsets`` partition as a transactional batch of the
request's producer id and epoch and stay pending, invisible to OffsetFetch, until the
transaction coordinator's marker commits them (or aborts them): see
``GroupCoordinator.complete_transaction``. Checks as Kafka 4's group coordinator: an empty
group id is INVALID_GROUP_ID; a partition of an unknown topic UNKNOWN_TOPIC_OR_PARTITION; a
metadata string longer than ``offset.metadata.max.bytes`` OFFSET_METADATA_TOO_LARGE; a
generation (v3+) that is not the group's ILLEGAL_GENERATION (a stale KIP-848 member epoch
too), an unknown member UNKNOWN_MEMBER_ID, a replaced static member FENCED_INSTANCE_ID; a
commit to an unknown group with a generation ILLEGAL_GENERATION (without one the group is
created, Empty, as for a simple consumer). Unlike OffsetCommit, a commit without generation
nor member id (v0-v2, or a producer given only the group id) is accepted in any group state,
and during a rebalance. The producer's epoch is checked by the partition's producer state
(an older epoch: INVALID_PRODUCER_EPOCH). Cluster mode: NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS as the other group APIs, and the answer waits until the
offsets' batch is committed (acks=-1). Version notes: leader epoch from v2; v4 only adds an
error clients may get (TRANSACTION_ABORTABLE, never answered here); v5 is sent by clients of
transactions v2 (KIP-890 part 2), which send no AddOffsetsToTxn: the group coordinator first
has the transaction coordinator add the group's ``__consumer_offsets`` partition to the
transaction (AddPartitionsToTxn v5, through the partition leaders' verifier), and writes the
offsets once it did; a refusal answers every partition (INVALID_TXN_STATE,
INVALID_PRODUCER_EPOCH for a fenced producer, COORDINATOR_NOT_AVAILABLE, which the client
retries, when the transaction coordinator cannot answer now). v6 (topic ids) is not
advertised.

Authorization (as Kafka): WRITE on the transactional id (else every partition is
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (else GROUP_AUTHORIZATION_FAILED),
READ on each topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_names
from pydmq.broker.handlers._groups import GROUP_DENIED, coordinator, group_denied
from pydmq.broker.handlers._transactions import TXN_ID_DENIED, txn_id_denied
from pydmq.groups.api import CommitRequest
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from pydmq.replication.txn_verification import produce_error
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

TopicPartitionKey = tuple[str, int]
# TxnOffsetCommit v5 is sent by clients of transactions v2 (KIP-890 part 2).
_TRANSACTIONS_V2_VERSION = 5


def handle(
    ctx: BrokerContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse | Awaitable[TxnOffsetCommitResponse]:
    # Authorized first (as Kafka): a refused request adds nothing to the transaction.
    if (
        ctx.api_version >= _TRANSACTIONS_V2_VERSION
        and not _refusal(ctx, request)
        and not coordinator(ctx).ownership_error(request.group_id)
    ):
        added = _add_offsets_partition(ctx, request)
        if isinstance(added, int):
            return _commit(ctx, request) if added == ErrorCode.NONE else _refused(request, added)
        return _commit_when_added(ctx, request, added)
    return _commit(ctx, request)


def _add_offsets_partition(
    ctx: BrokerContext, request: TxnOffsetCommitRequest
) -> int | Awaitable[int]:
    """Transactions v2: the transaction coordinator adds the group's partition to the
    transaction; the code to answer (now or later)."""
    verifier = ctx.broker.replica_manager.txn_verifier
    assert verifier is not None  # every broker has one
    tp = TopicPartition(
        OFFSETS_TOPIC, ctx.broker.group_coordinator_log.partition_for(request.group_id)
    )
    verdicts = verifier.verify(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp], True
    )
    if isinstance(verdicts, Mapping):
        return _offset_commit_error(verdicts[tp])
    return _when_verified(verdicts, tp)


async def _when_verified(
    verdicts: Awaitable[Mapping[TopicPartition, int]], tp: TopicPartition
) -> int:
    return _offset_commit_error((await verdicts)[tp])


def _offset_commit_error(code: int) -> int:
    """The coordinator's answer to the add as TxnOffsetCommit answers it (the leaders'
    mapping, then Kafka's group coordinator's: NOT_ENOUGH_REPLICAS is
    COORDINATOR_NOT_AVAILABLE)."""
    mapped, _ = produce_error(code)
    return (
        ErrorCode.COORDINATOR_NOT_AVAILABLE if mapped == ErrorCode.NOT_ENOUGH_REPLICAS else mapped
    )


async def _commit_when_added(
    ctx: BrokerContext, request: TxnOffsetCommitRequest, added: Awaitable[int]
) -> TxnOffsetCommitResponse:
    code = await added
    if code != ErrorCode.NONE:
        return _refused(request, code)
    response = _commit(ctx, request)
    return response if isinstance(response, TxnOffsetCommitResponse) else await response


def _refused(request: TxnOffsetCommitRequest, code: int) -> TxnOffsetCommitResponse:
    return _response(
        request,
        {(t.name, p.partition_index): code for t in request.topics for p in t.partitions},
    )


def _commit(
    ctx: BrokerContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse | Awaitable[TxnOffsetCommitResponse]:
    version = ctx.api_version
    topics = ctx.broker.topics
    errors: dict[TopicPartitionKey, int] = {}
    wanted: dict[TopicPartitionKey, tuple[int, int, str | None]] = {}
    refusal = _refusal(ctx, request)
    if refusal:
        errors.update(
            ((t.name, p.partition_index), refusal) for t in request.topics for p in t.partitions
        )
        return _response(request, errors)
    readable = authorized_names(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        info = topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < len(info.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                epoch = p.committed_leader_epoch if version >= 2 else -1
                wanted[tp] = (p.committed_offset, epoch, p.committed_metadata)
    group_coordinator = coordinator(ctx)
    mark = group_coordinator.write_mark
    if wanted:
        errors.update(
            group_coordinator.commit_offsets(
                CommitRequest(
                    group_id=request.group_id,
                    member_id=request.member_id if version >= 3 else "",
                    group_instance_id=request.group_instance_id if version >= 3 else None,
                    generation_id=request.generation_id if version >= 3 else -1,
                    retention_time_ms=-1,
                    offsets=wanted,
                    api_version=version,
                    producer=(request.producer_id, request.producer_epoch),
                )
            )
        )
    if group_coordinator.wrote_since(request.group_id, mark):
        committed = group_coordinator.await_writes(request.group_id, mark, offsets=True)
        return _when_committed(committed, request, errors)
    return _response(request, errors)


def _refusal(ctx: BrokerContext, request: TxnOffsetCommitRequest) -> int:
    """The code every partition gets when the transactional id or the group is refused."""
    if txn_id_denied(ctx, request.transactional_id):
        return TXN_ID_DENIED
    if group_denied(ctx, request.group_id, AclOperation.READ):
        return GROUP_DENIED
    return ErrorCode.NONE


async def _when_committed(
    committed: Awaitable[int],
    request: TxnOffsetCommitRequest,
    errors: dict[TopicPartitionKey, int],
) -> TxnOffsetCommitResponse:
    error = await committed
    if error:
        errors = {tp: e or error for tp, e in errors.items()}
    return _response(request, errors)


def _response(
    request: TxnOffsetCommitRequest, errors: dict[TopicPartitionKey, int]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


HANDLER = ApiHandlerSpec(28, 0, 5, handle, "TxnOffsetCommit")
