"""Produce (key 0), v3-v12.

Each partition's record set is validated and appended as it arrived (offsets patched in place,
CRC untouched). acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS); acks=0 gets no response.
zstd batches need v7+ (UNSUPPORTED_COMPRESSION_TYPE). Idempotent retries of one of the last
five batches return the original base offset. Transactional batches are appended and open
(or continue) their producer's transaction on the partition (KIP-98, transactions v1: the
client added the partition with AddPartitionsToTxn). With
``transaction.partition.verification.enable`` (default true) the leader first asks the
transactional id's coordinator whether the partition is in the transaction, for a
transaction's first batch on the partition (KIP-890 part 1,
:mod:`pydmq.replication.txn_verification`): INVALID_TXN_STATE when it is not, nothing
appended; NOT_ENOUGH_REPLICAS (retried) when the coordinator cannot answer now. v12 is sent
by clients of transactions v2 (KIP-890 part 2, ``transaction.version`` 2), which send no
AddPartitionsToTxn: the leader has the coordinator add the partition to the transaction
(AddPartitionsToTxn v5, ``verify_only`` false) before a transaction's first batch on it is
appended, whatever the verification config says; the same answers. A transactional batch in a request without a
``transactional_id`` is TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka (its authorization of
the transactional id fails); the producer state answers an older epoch INVALID_PRODUCER_EPOCH,
a new epoch not starting at sequence 0 OUT_OF_ORDER_SEQUENCE_NUMBER, and a
non-transactional batch while the producer's transaction is open INVALID_TXN_STATE.
``max.message.bytes`` -> MESSAGE_TOO_LARGE.
A client may not write to an internal topic (``__consumer_offsets``, ``__transaction_state``):
INVALID_TOPIC_EXCEPTION, as Kafka.
v13 (topic ids in Produce) is not advertised yet: Kafka 4.0 stops at v12.

This handler maps the request to :class:`~pydmq.replication.append.ProduceEntry` values and
the results back, and keeps the checks Kafka's KafkaApis makes (internal topics, acks, the
batch checks of the produce request); the replica manager does the rest
(:meth:`~pydmq.replication.replica_manager.ReplicaManager.append_records`, see
:mod:`pydmq.replication.append`). Replication: a partition not led here is
NOT_LEADER_OR_FOLLOWER. ``acks=-1`` is refused with NOT_ENOUGH_REPLICAS before appending when
the ISR is below the minimum; otherwise the records are appended and the response waits in the
produce purgatory until the high watermark passed them on every partition (REQUEST_TIMED_OUT
after ``timeout_ms``; see :mod:`pydmq.replication.delayed_produce`). ``acks=1`` answers after
the leader's append. In single-node mode the high watermark follows each append, so nothing
waits.

Authorization (with an authorizer, as Kafka's KafkaApis): a transactional request needs
WRITE on its transactional id, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
each topic needs WRITE, else its partitions are TOPIC_AUTHORIZATION_FAILED (checked before
the topic's existence and the internal-topic rule). Idempotence needs no check here (Kafka 3+
checks it at InitProducerId). The decisions are cached by the authorizer per (principal,
topic), so this costs one dict lookup per topic.

Storage: an append the log could not store (a full disk, an I/O error, an offline log dir)
is KAFKA_STORAGE_ERROR, which clients retry; nothing of it is in the log and the idempotent
producer state did not move, so the retry of the same batch is accepted once space returns.

Quotas: with a ``producer_byte_rate`` quota for the client (its user and client id), the
request's size is recorded after the append and a client over its rate gets
``throttle_time_ms`` and is muted for that time (:mod:`pydmq.quotas.manager`; a client before
v6 gets its response delayed instead). Nothing is looked up when no such quota exists.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized, authorized_names
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.batch_header import (
    ATTRIBUTES_AT,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    MAGIC_AT,
    TRANSACTIONAL_FLAG,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from pydmq.protocol.topic_names import INTERNAL_TOPICS
from pydmq.replication.append import AppendResult, ProduceEntry
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

_ZSTD = 4
# Produce v12 is sent by clients of transactions v2 (KIP-890 part 2): no AddPartitionsToTxn.
_TRANSACTIONS_V2_VERSION = 12
# The low byte of the int16 attributes holds every attribute bit.
_ATTRIBUTE_BITS_AT = ATTRIBUTES_AT + 1
_NO_RECORDS = memoryview(b"")
_WRITE = AclOperation.WRITE
_TXN_ID_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _partition_error(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time=-1,
        log_start_offset=-1,
        error_message=message,
    )


def _entry(
    tp: TopicPartition, records: bytes | memoryview | None, version: int, transactional: bool
) -> ProduceEntry:
    """The partition's entry for the replica manager, with Kafka's produce-request checks of
    its batch (answered after the leader checks)."""
    if records is None or len(records) == 0:
        return ProduceEntry(tp, _NO_RECORDS, ErrorCode.INVALID_RECORD, "no records")
    view = records if isinstance(records, memoryview) else memoryview(bytearray(records))
    if len(view) > MAGIC_AT and view[MAGIC_AT] in (0, 1):
        # Kafka's ProduceRequest.validateRecords (v3+): InvalidRecordException. Other bad
        # magics are CORRUPT_MESSAGE ("Invalid magic found in record"), from the log.
        return ProduceEntry(
            tp,
            view,
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {version} are only allowed to contain record "
            "batches with magic version 2",
        )
    if len(view) >= BATCH_HEADER_SIZE:
        attributes = view[_ATTRIBUTE_BITS_AT]
        if (attributes & COMPRESSION_MASK) == _ZSTD and version < 7:
            return ProduceEntry(tp, view, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if attributes & TRANSACTIONAL_FLAG and not transactional:
            return ProduceEntry(
                tp,
                view,
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "a transactional batch needs the request's transactional id",
            )
    return ProduceEntry(tp, view)


def handle(
    ctx: BrokerContext, request: ProduceRequest
) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    acks = request.acks
    version = ctx.api_version
    transactional = request.transactional_id is not None
    valid_acks = acks in (0, 1, -1)
    response = ProduceResponse()
    txn_id = request.transactional_id
    if txn_id is not None and not authorized(ctx, _WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return None if acks == 0 else _every_partition(request, _TXN_ID_DENIED)
    writable = authorized_names(ctx, _WRITE, ResourceType.TOPIC, _topic_names(request))
    entries: list[ProduceEntry] = []
    # The topics whose partitions became entries, with their responses to fill from results.
    appended: list[tuple[TopicProduceResponse, list[PartitionProduceData]]] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        topic_response = TopicProduceResponse(name=name)
        response.responses.append(topic_response)
        if name not in writable:
            topic_response.partition_responses = [
                _partition_error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for data in topic_data.partition_data
            ]
        elif name in INTERNAL_TOPICS:
            # Only the coordinator that owns an internal topic appends to it (through the
            # replica manager, not this handler); Kafka answers clients this code.
            message = f"Cannot append to internal topic {name}"
            topic_response.partition_responses = [
                _partition_error(data.index, ErrorCode.INVALID_TOPIC_EXCEPTION, message)
                for data in topic_data.partition_data
            ]
        elif not valid_acks:
            topic_response.partition_responses = [
                _partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
                for data in topic_data.partition_data
            ]
        else:
            for data in topic_data.partition_data:
                entries.append(
                    _entry(TopicPartition(name, data.index), data.records, version, transactional)
                )
            appended.append((topic_response, topic_data.partition_data))
    if not entries:
        _throttle(ctx, response)
        return None if acks == 0 else response
    results = ctx.broker.replica_manager.append_records(
        entries,
        acks,
        request.timeout,
        transactional_id=request.transactional_id,
        add_partition=version >= _TRANSACTIONS_V2_VERSION,
    )
    if acks == 0:
        # no answer (a throttled client is muted all the same); a produce waiting for its
        # transaction's verification appends all the same
        _throttle(ctx, response)
        return None if isinstance(results, list) else _without_response(results)
    if isinstance(results, list):
        _fill(appended, results)
        _throttle(ctx, response)
        return response
    return _respond_when_acked(ctx, response, appended, results)


def _throttle(ctx: BrokerContext, response: ProduceResponse) -> None:
    """Kafka's produce quota, after the append: record the request's size for the client
    and answer (and mute it for) the throttle time when it went over its byte rate."""
    produce = ctx.broker.quotas.produce
    if produce.enabled:
        throttle = produce.record_and_get_throttle_time_ms(
            ctx.principal.name, ctx.client_id or "", ctx.request_size
        )
        ctx.throttle_time_ms = response.throttle_time = throttle


def _topic_names(request: ProduceRequest) -> list[str]:
    return [topic_data.name for topic_data in request.topic_data]


def _every_partition(request: ProduceRequest, code: int) -> ProduceResponse:
    """Every partition of the request answered ``code``."""
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic_data.name,
                partition_responses=[
                    _partition_error(data.index, code) for data in topic_data.partition_data
                ],
            )
            for topic_data in request.topic_data
        ]
    )


def _fill(
    appended: list[tuple[TopicProduceResponse, list[PartitionProduceData]]],
    results: list[AppendResult],
) -> None:
    """The partition responses of the appended topics, from the results in entry order."""
    i = 0
    for topic_response, partitions in appended:
        responses = topic_response.partition_responses
        for data in partitions:
            result = results[i]
            i += 1
            responses.append(
                PartitionProduceResponse(
                    index=data.index,
                    error_code=result.error_code,
                    base_offset=result.base_offset,
                    log_append_time=result.log_append_time,
                    log_start_offset=result.log_start_offset,
                    error_message=result.error_message,
                )
            )


async def _without_response(waiting: Awaitable[list[AppendResult]]) -> None:
    await waiting


async def _respond_when_acked(
    ctx: BrokerContext,
    response: ProduceResponse,
    appended: list[tuple[TopicProduceResponse, list[PartitionProduceData]]],
    waiting: Awaitable[list[AppendResult]],
) -> ProduceResponse:
    _fill(appended, await waiting)
    _throttle(ctx, response)
    return response


# Advertised from v0 like Kafka 4 (v0-v2 requests close the connection): see ApiHandlerSpec.
HANDLER = ApiHandlerSpec(0, 3, 12, handle, "Produce", advertised_min=0)
