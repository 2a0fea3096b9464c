"""Produce (key 0), v3-v12.

Each partition's record set is validated and appended as it arrived (offsets patched in place,
CRC untouched). acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS); acks=0 gets no response.
zstd batches need v7+ (UNSUPPORTED_COMPRESSION_TYPE). Idempotent retries of one of the last
five batches return the original base offset. Transactional produce is not supported yet
(transactions are a later issue): such batches get INVALID_TXN_STATE. ``max.message.bytes`` -> MESSAGE_TOO_LARGE.
A client may not write to an internal topic (``__consumer_offsets``, ``__transaction_state``):
INVALID_TOPIC_EXCEPTION, as Kafka.
v13 (topic ids in Produce) is not advertised yet: Kafka 4.0 stops at v12.

Replication: a partition not led here is NOT_LEADER_OR_FOLLOWER. ``acks=-1`` is refused with
NOT_ENOUGH_REPLICAS before appending when the ISR is below the minimum; otherwise the records
are appended and the response waits in the produce purgatory until the high watermark passed
them on every partition (REQUEST_TIMED_OUT after ``timeout_ms``; see
:mod:`pydmq.replication.delayed_produce`). ``acks=1`` answers after the leader's append. In
single-node mode the high watermark follows each append, so nothing waits.

Storage: an append the log could not store (a full disk, an I/O error, an offline log dir)
is KAFKA_STORAGE_ERROR, which clients retry; nothing of it is in the log and the idempotent
producer state did not move, so the retry of the same batch is accepted once space returns.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import cast

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._leadership import leader_partition
from pydmq.protocol.batch_header import (
    ATTRIBUTES_AT,
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    MAGIC_AT,
    PRODUCER,
    PRODUCER_ID_AT,
    TRANSACTIONAL_FLAG,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.produce import (
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from pydmq.protocol.topic_names import INTERNAL_TOPICS
from pydmq.replication.delayed_produce import PendingAck, await_acks, check_acks
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import LogAppendError

__all__ = ["HANDLER"]

log = logging.getLogger(__name__)

_ZSTD = 4
# The low byte of the int16 attributes holds every attribute bit.
_ATTRIBUTE_BITS_AT = ATTRIBUTES_AT + 1
# Answers that make librdkafka's idempotent producer bump its epoch or fail: always logged.
_SEQUENCE_ERRORS = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    }
)


# Sequence errors are always worth a line; storage errors are logged once per episode by the
# log (a full disk refuses every produce until space returns).
_LOG_LEVEL: dict[int, int] = {int(code): logging.WARNING for code in _SEQUENCE_ERRORS}
_LOG_LEVEL[ErrorCode.KAFKA_STORAGE_ERROR] = logging.DEBUG


def _writer_of(view: memoryview) -> tuple[int, int, int]:
    """Producer id, epoch and base sequence of the first batch (ids -1 when too short)."""
    if len(view) < BATCH_HEADER_SIZE:
        return (-1, -1, -1)
    return cast("tuple[int, int, int]", PRODUCER.unpack_from(view, PRODUCER_ID_AT))


def _describe(writer: tuple[int, int, int]) -> str:
    producer_id, epoch, sequence = writer
    return f" (producer {producer_id} epoch {epoch} seq {sequence})" if producer_id >= 0 else ""


def _partition_error(index: int, code: int, message: str | None = None) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=code,
        base_offset=-1,
        log_append_time=-1,
        log_start_offset=-1,
        error_message=message,
    )


def _reporter(
    result: PartitionProduceResponse, tp: TopicPartition, writer: tuple[int, int, int]
) -> Callable[[int], None]:
    def report(code: int) -> None:
        result.error_code = code
        if code == ErrorCode.NONE:
            return
        # A failed acks=all answer makes an idempotent client retry (or, for some codes, bump
        # its epoch): these lines let a duplicate or a gap seen later be traced to its answer.
        log.info(
            "produce to %s at offset %d answered %s%s",
            tp,
            result.base_offset,
            ErrorCode(code).name,
            _describe(writer),
        )
        if code != ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            # Kafka answers a failed delayed produce without its offsets.
            result.base_offset = -1
            result.log_append_time = -1

    return report


def handle(
    ctx: BrokerContext, request: ProduceRequest
) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
    broker = ctx.broker
    replica_manager = broker.replica_manager
    acks = request.acks
    response = ProduceResponse()
    pending: list[PendingAck] = []
    for topic_data in request.topic_data:
        topic_response = TopicProduceResponse(name=topic_data.name)
        response.responses.append(topic_response)
        if topic_data.name in INTERNAL_TOPICS:
            # Only the coordinator that owns an internal topic appends to it (through the
            # replica manager, not this handler); Kafka answers clients this code.
            topic_response.partition_responses = [
                _partition_error(
                    data.index,
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Cannot append to internal topic {topic_data.name}",
                )
                for data in topic_data.partition_data
            ]
            continue
        for data in topic_data.partition_data:
            if acks not in (0, 1, -1):
                topic_response.partition_responses.append(
                    _partition_error(data.index, ErrorCode.INVALID_REQUIRED_ACKS)
                )
                continue
            partition, error = leader_partition(broker, TopicPartition(topic_data.name, data.index))
            if partition is None:
                topic_response.partition_responses.append(_partition_error(data.index, error))
                continue
            records = data.records
            if records is None or len(records) == 0:
                topic_response.partition_responses.append(
                    _partition_error(data.index, ErrorCode.INVALID_RECORD, "no records")
                )
                continue
            view = records if isinstance(records, memoryview) else memoryview(bytearray(records))
            if len(view) > MAGIC_AT and view[MAGIC_AT] in (0, 1):
                # Kafka's ProduceRequest.validateRecords (v3+): InvalidRecordException. Other
                # bad magics are CORRUPT_MESSAGE ("Invalid magic found in record"), below.
                topic_response.partition_responses.append(
                    _partition_error(
                        data.index,
                        ErrorCode.INVALID_RECORD,
                        f"Produce requests with version {ctx.api_version} are only allowed to "
                        "contain record batches with magic version 2",
                    )
                )
                continue
            if len(view) >= BATCH_HEADER_SIZE:
                attributes = view[_ATTRIBUTE_BITS_AT]
                if (attributes & COMPRESSION_MASK) == _ZSTD and ctx.api_version < 7:
                    topic_response.partition_responses.append(
                        _partition_error(data.index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                    )
                    continue
                if attributes & TRANSACTIONAL_FLAG or request.transactional_id is not None:
                    topic_response.partition_responses.append(
                        _partition_error(
                            data.index,
                            ErrorCode.INVALID_TXN_STATE,
                            "transactions are not supported by this broker yet",
                        )
                    )
                    continue
            try:
                info = replica_manager.append(partition, view, acks)
            except LogAppendError as exc:
                log.log(
                    _LOG_LEVEL.get(exc.error_code, logging.INFO),
                    "produce to %s refused with %s%s: %s",
                    partition.tp,
                    ErrorCode(exc.error_code).name,
                    _describe(_writer_of(view)),
                    exc.message,
                )
                topic_response.partition_responses.append(
                    _partition_error(data.index, exc.error_code, exc.message)
                )
                continue
            result = PartitionProduceResponse(
                index=data.index,
                error_code=ErrorCode.NONE,
                base_offset=info.first_offset,
                log_append_time=info.log_append_time,
                log_start_offset=info.log_start_offset,
            )
            topic_response.partition_responses.append(result)
            if acks == -1:
                ack = PendingAck(
                    partition,
                    info.last_offset + 1,
                    _reporter(result, partition.tp, _writer_of(view)),
                )
                if not check_acks(ack):
                    pending.append(ack)
    if acks == 0:
        return None
    if pending:
        return _respond_when_acked(ctx, response, pending, request.timeout)
    return response


async def _respond_when_acked(
    ctx: BrokerContext, response: ProduceResponse, pending: list[PendingAck], timeout_ms: int
) -> ProduceResponse:
    await await_acks(ctx.broker.replica_manager.produce_purgatory, pending, timeout_ms)
    return response


# Advertised from v0 like Kafka 4 (v0-v2 requests close the connection): see ApiHandlerSpec.
HANDLER = ApiHandlerSpec(0, 3, 12, handle, "Produce", advertised_min=0)
