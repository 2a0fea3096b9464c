"""Appending produced records to the partitions led here: Kafka's
``ReplicaManager.appendRecords`` with its delayed produce, with neutral entries and results.

The caller (the Produce handler) keeps the checks of the request itself (acks value, internal
topics, the batch checks of Kafka's produce request: magic, zstd before Produce v7,
transactional batches) and hands over one :class:`ProduceEntry` per partition; it gets back
one :class:`AppendResult` per entry, in the entries' order, at once or, for ``acks=-1``, once
every partition is settled.

Per entry, in order: a partition not hosted here is NOT_LEADER_OR_FOLLOWER when the cluster
knows it, else UNKNOWN_TOPIC_OR_PARTITION; one hosted but not led here is
NOT_LEADER_OR_FOLLOWER; then the caller's refusal of the batch, if any, is answered; then a
transaction's first batch on the partition is verified with the transaction coordinator
(KIP-890 part 1, :mod:`pydmq.replication.txn_verification`: refused with its error, or, when
the coordinator is another broker, appended once it answered; a transactions v2 produce has
the coordinator add the partition to the transaction instead, KIP-890 part 2); then the batch is appended (:meth:`ReplicaManager.append`: the log validates it, ``acks=-1`` is refused
with NOT_ENOUGH_REPLICAS before appending when the ISR is below the minimum). An append the
log refused answers its error (KAFKA_STORAGE_ERROR when the storage failed: nothing of it is
in the log and the idempotent producer state did not move, so a retry is accepted once the
storage recovers).

``acks=-1``: the results wait in the produce purgatory until the high watermark passed the
records on every partition (:mod:`pydmq.replication.delayed_produce`): NOT_LEADER_OR_FOLLOWER
on a leadership change, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum
meanwhile (offsets kept), REQUEST_TIMED_OUT after ``timeout_ms`` (a failed delayed produce
answers without its offsets, as Kafka's). In single-node mode the high watermark follows each
append, so nothing waits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from pydmq.protocol.batch_header import BATCH_HEADER_SIZE, PRODUCER, PRODUCER_ID_AT
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.delayed_produce import PendingAck, await_acks, check_acks
from pydmq.replication.txn_verification import still_verified, verify_first_batches
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import AppendOrigin, LogAppendError

if TYPE_CHECKING:
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = ["AppendResult", "ProduceEntry", "append_records"]

log = logging.getLogger(__name__)

# Answers that make librdkafka's idempotent producer bump its epoch or fail: always logged;
# storage errors are logged once per episode by the log (a full disk refuses every produce
# until space returns).
_LOG_LEVEL: dict[int, int] = {
    int(code): logging.WARNING
    for code in (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
    )
}
_LOG_LEVEL[ErrorCode.KAFKA_STORAGE_ERROR] = logging.DEBUG


@dataclass(slots=True)
class ProduceEntry:
    """One partition's record set of a produce, with the caller's verdict on the batch."""

    tp: TopicPartition
    # Usually a view of the request's frame in the connection's receive buffer: valid only
    # until the handler's first await (copied before one, see append_records).
    records: memoryview
    # The caller refused the batch (Kafka's checks of the produce request): answered with
    # this error, after the leader checks, instead of appending.
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    # Set while its transaction's verification is awaited (KIP-890): the producer state's
    # guard the append checks is still there.
    verification_guard: object | None = None


@dataclass(slots=True)
class AppendResult:
    """What one entry's append gave (Kafka's PartitionResponse); -1 where unknown."""

    error_code: int = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


def append_records(
    replica_manager: ReplicaManager,
    entries: list[ProduceEntry],
    acks: int,
    timeout_ms: int,
    origin: AppendOrigin = AppendOrigin.CLIENT,
    transactional_id: str | None = None,
    add_partition: bool = False,
) -> list[AppendResult] | Awaitable[list[AppendResult]]:
    """Append every entry (of ``origin``, a produce of ``transactional_id`` if any) as
    leader; the results now, or once verified (with ``add_partition``, a transactions v2
    produce: once the coordinator added the partitions) and acks=-1 is settled."""
    verifier = replica_manager.txn_verifier
    if (
        transactional_id is not None
        and verifier is not None
        and (add_partition or verifier.enabled)
    ):
        verifying = verify_first_batches(
            replica_manager, verifier, transactional_id, entries, add_partition
        )
        if verifying is not None:
            # The records are views of the connection's receive buffer, which the next
            # frames overwrite once this request is pending: appended after an await, they
            # must be copied now (writable: the append patches offsets in place).
            for entry in entries:
                if not entry.error_code:
                    entry.records = memoryview(bytearray(entry.records))
            return _append_when_verified(
                replica_manager, verifying, entries, acks, timeout_ms, origin
            )
    return _append(replica_manager, entries, acks, timeout_ms, origin)


async def _append_when_verified(
    replica_manager: ReplicaManager,
    verifying: Awaitable[None],
    entries: list[ProduceEntry],
    acks: int,
    timeout_ms: int,
    origin: AppendOrigin,
) -> list[AppendResult]:
    await verifying
    results = _append(replica_manager, entries, acks, timeout_ms, origin)
    return results if isinstance(results, list) else await results


def _append(
    replica_manager: ReplicaManager,
    entries: list[ProduceEntry],
    acks: int,
    timeout_ms: int,
    origin: AppendOrigin,
) -> list[AppendResult] | Awaitable[list[AppendResult]]:
    results: list[AppendResult] = []
    pending: list[PendingAck] = []
    for entry in entries:
        partition, error = replica_manager.leader_partition(entry.tp)
        if partition is None:
            results.append(AppendResult(error))
            continue
        if entry.error_code:
            results.append(AppendResult(entry.error_code, error_message=entry.error_message))
            continue
        records = entry.records
        if not still_verified(replica_manager, entry):
            results.append(
                AppendResult(
                    ErrorCode.INVALID_TXN_STATE,
                    error_message="the transaction ended while the partition was verified",
                )
            )
            continue
        try:
            info = replica_manager.append(partition, records, acks, origin)
        except LogAppendError as exc:
            log.log(
                _LOG_LEVEL.get(exc.error_code, logging.INFO),
                "produce to %s refused with %s%s: %s",
                entry.tp,
                ErrorCode(exc.error_code).name,
                _describe(_writer_of(records)),
                exc.message,
            )
            results.append(AppendResult(exc.error_code, error_message=exc.message))
            continue
        result = AppendResult(
            ErrorCode.NONE, info.first_offset, info.log_append_time, info.log_start_offset
        )
        results.append(result)
        if acks == -1:
            ack = PendingAck(
                partition,
                info.last_offset + 1,
                _DelayedAnswer(result, entry.tp, _writer_of(records)),
            )
            if not check_acks(ack):
                pending.append(ack)
    if pending:
        return _when_acked(replica_manager, results, pending, timeout_ms)
    return results


async def _when_acked(
    replica_manager: ReplicaManager,
    results: list[AppendResult],
    pending: list[PendingAck],
    timeout_ms: int,
) -> list[AppendResult]:
    await await_acks(replica_manager.produce_purgatory, pending, timeout_ms)
    return results


class _DelayedAnswer:
    """Where the produce purgatory reports one partition's settled acks=-1 append: called with
    the error code (an object, not a closure or bound method: one allocation per partition)."""

    __slots__ = ("result", "tp", "writer")

    def __init__(self, result: AppendResult, tp: TopicPartition, writer: tuple[int, int, int]):
        self.result = result
        self.tp = tp
        self.writer = writer

    def __call__(self, code: int) -> None:
        result = self.result
        result.error_code = code
        if code == ErrorCode.NONE:
            return
        # A failed acks=all answer makes an idempotent client retry (or, for some codes, bump
        # its epoch): these lines let a duplicate or a gap seen later be traced to its answer.
        log.info(
            "produce to %s at offset %d answered %s%s",
            self.tp,
            result.base_offset,
            ErrorCode(code).name,
            _describe(self.writer),
        )
        if code != ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
            # Kafka answers a failed delayed produce without its offsets.
            result.base_offset = -1
            result.log_append_time = -1


def _writer_of(view: memoryview) -> tuple[int, int, int]:
    """Producer id, epoch and base sequence of the first batch (ids -1 when too short)."""
    if len(view) < BATCH_HEADER_SIZE:
        return (-1, -1, -1)
    return cast("tuple[int, int, int]", PRODUCER.unpack_from(view, PRODUCER_ID_AT))


def _describe(writer: tuple[int, int, int]) -> str:
    producer_id, epoch, sequence = writer
    return f" (producer {producer_id} epoch {epoch} seq {sequence})" if producer_id >= 0 else ""
