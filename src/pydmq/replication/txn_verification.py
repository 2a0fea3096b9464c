"""Partition verification before a transactional produce (KIP-890 part 1, Kafka's
``transaction.partition.verification.enable``).

Before a leader appends the FIRST transactional batch of a producer's transaction to a
partition (its producer state has no transaction open for that producer id at that epoch), it
asks the transaction coordinator of the request's ``transactional_id`` whether the partition is
in the ongoing transaction (AddPartitionsToTxn ``verify_only``, through the
:class:`TransactionVerifier` port). NONE appends; any other answer refuses the batch and
appends nothing, so a zombie batch (its transaction already aborted, or the partition never
added) cannot open a transaction on the partition that no marker would ever end, which would
hold its last stable offset back for good. Later batches of an open transaction are not
verified: only a transaction's first batch per partition waits.

The coordinator's answer reaches the producer as Kafka's leaders map it
(:func:`produce_error`): INVALID_TXN_STATE as is; the retriable coordinator errors as
NOT_ENOUGH_REPLICAS (which every client version retries without a metadata refresh);
UNKNOWN_PRODUCER_ID as OUT_OF_ORDER_SEQUENCE_NUMBER; PRODUCER_FENCED as INVALID_PRODUCER_EPOCH
(clients before Produce v9 do not know PRODUCER_FENCED).

A verifier answers at once (the coordinator is this node: its own operation, no network) or
later (another broker's coordinator). While the answer is awaited, each partition's producer
state holds a verification guard for the producer
(:meth:`~pydmq.producers.state.ProducerStateManager.start_verification`), shared by the
producer's produces verified meanwhile; a marker removes it, and the append checks it first,
so a batch verified before its transaction ended is refused. Not the previous transaction's
marker under transactions v2: written at the epoch the coordinator bumped, it finds the guard
of the next transaction's first batch at that epoch, which stays (Kafka's
``isV2NextTransactionStarted``; removing it refused that batch, INVALID_TXN_STATE, fatal to
the producer, and its later batches then failed OUT_OF_ORDER_SEQUENCE_NUMBER: franz-go's
TestTxnEtl on transactions v2). A refusal does not remove it (a
produce sharing it may have been verified: removing it would refuse that batch as a zombie,
INVALID_TXN_STATE, which is fatal to a producer); the producer's next transactional append
does, as Kafka's.

Transactions v2 (KIP-890 part 2; Produce v12, or TxnOffsetCommit v5 for the group
coordinator's partition): the client sends no AddPartitionsToTxn, so the leader adds the
partition itself (``add_partition``: Kafka's ``TransactionSupportedOperation.addPartition``,
AddPartitionsToTxn v5 with ``verify_only`` false), whatever
``transaction.partition.verification.enable`` says; the coordinator's answer is mapped as a
verification's.

Owned by the event loop (the produce path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from pydmq.protocol.batch_header import (
    ATTRIBUTES_AT,
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    PRODUCER,
    PRODUCER_ID_AT,
    TRANSACTIONAL_FLAG,
)
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.replication.append import ProduceEntry
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = ["TransactionVerifier", "produce_error", "still_verified", "verify_first_batches"]

# The low byte of the int16 attributes holds every attribute bit.
_ATTRIBUTE_BITS_AT = ATTRIBUTES_AT + 1

Verdicts = Mapping[TopicPartition, int]


class TransactionVerifier(Protocol):
    """Asks a transactional id's coordinator whether partitions are in its ongoing
    transaction (AddPartitionsToTxn ``verify_only``)."""

    @property
    def enabled(self) -> bool:
        """``transaction.partition.verification.enable`` (a dynamic broker config)."""
        ...

    def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
        add_partition: bool,
    ) -> Verdicts | Awaitable[Verdicts]:
        """The coordinator's code per partition: now, or once its answer arrived; with
        ``add_partition`` (transactions v2) the coordinator adds the partitions to the
        transaction (starting it) instead of only checking them."""
        ...


_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


def produce_error(code: int) -> tuple[int, str | None]:
    """The produce answer (code, message) of a partition the coordinator answered ``code``."""
    if code == ErrorCode.NONE:
        return ErrorCode.NONE, None
    name = _name(code)
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "the partition is not in the producer's ongoing transaction"
    if code in _RETRIABLE:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            f"the partition's transaction could not be verified with its coordinator ({name})",
        )
    if code == ErrorCode.UNKNOWN_PRODUCER_ID:
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, f"transaction verification: {name}"
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, f"transaction verification: {name}"
    return code, f"transaction verification: {name}"


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


@dataclass(slots=True)
class _Verifying:
    """The entries of one producer (id and epoch) whose partitions are being verified."""

    producer_id: int
    producer_epoch: int
    entries: list[ProduceEntry]


def _first_transactional_batches(
    replica_manager: ReplicaManager, entries: list[ProduceEntry]
) -> dict[tuple[int, int], _Verifying]:
    """The entries that open a transaction on their partition, by producer id and epoch."""
    found: dict[tuple[int, int], _Verifying] = {}
    for entry in entries:
        records = entry.records
        if (
            entry.error_code
            or len(records) < BATCH_HEADER_SIZE
            or records[_ATTRIBUTE_BITS_AT] & (TRANSACTIONAL_FLAG | CONTROL_FLAG)
            != TRANSACTIONAL_FLAG
        ):
            continue
        partition, _ = replica_manager.leader_partition(entry.tp)
        if partition is None:
            continue  # answered by the leader checks
        producer_id, producer_epoch, _ = cast(
            "tuple[int, int, int]", PRODUCER.unpack_from(records, PRODUCER_ID_AT)
        )
        if partition.log.producer_state.has_ongoing_txn(producer_id, producer_epoch):
            continue
        key = (producer_id, producer_epoch)
        verifying = found.get(key)
        if verifying is None:
            verifying = found[key] = _Verifying(producer_id, producer_epoch, [])
        verifying.entries.append(entry)
    return found


def _apply(verifying: _Verifying, verdicts: Verdicts) -> None:
    for entry in verifying.entries:
        code, message = produce_error(verdicts.get(entry.tp, ErrorCode.UNKNOWN_SERVER_ERROR))
        if code:
            entry.error_code = code
            entry.error_message = message


def verify_first_batches(
    replica_manager: ReplicaManager,
    verifier: TransactionVerifier,
    transactional_id: str,
    entries: list[ProduceEntry],
    add_partition: bool,
) -> Awaitable[None] | None:
    """Verify (or, ``add_partition``, add to the transaction) the entries that open a
    transaction on their partition; each refused entry gets its produce error. None when
    every answer was had at once; else an awaitable that settles them (each waiting entry
    holding its verification guard meanwhile)."""
    waiting: list[tuple[_Verifying, Awaitable[Verdicts]]] = []
    for verifying in _first_transactional_batches(replica_manager, entries).values():
        verdicts = verifier.verify(
            transactional_id,
            verifying.producer_id,
            verifying.producer_epoch,
            [entry.tp for entry in verifying.entries],
            add_partition,
        )
        if isinstance(verdicts, Mapping):
            _apply(verifying, verdicts)
        else:
            for entry in verifying.entries:
                state = replica_manager.partitions[entry.tp].log.producer_state
                _, _, sequence = cast(
                    "tuple[int, int, int]", PRODUCER.unpack_from(entry.records, PRODUCER_ID_AT)
                )
                entry.verification_guard = state.start_verification(
                    verifying.producer_id,
                    verifying.producer_epoch,
                    sequence,
                    supports_epoch_bump=add_partition,
                )
            waiting.append((verifying, verdicts))
    if not waiting:
        return None
    return _settle(waiting)


async def _settle(waiting: list[tuple[_Verifying, Awaitable[Verdicts]]]) -> None:
    answers = await asyncio.gather(*(verdicts for _, verdicts in waiting))
    for (verifying, _), verdicts in zip(waiting, answers, strict=True):
        _apply(verifying, verdicts)


def still_verified(replica_manager: ReplicaManager, entry: ProduceEntry) -> bool:
    """Whether a verified entry may still open its transaction: its guard is still there (no
    marker of the producer since it was verified), or the transaction is open already."""
    guard = entry.verification_guard
    if guard is None:
        return True
    partition = replica_manager.partitions.get(entry.tp)
    if partition is None:
        return True  # answered by the leader checks
    producer_id, producer_epoch, _ = cast(
        "tuple[int, int, int]", PRODUCER.unpack_from(entry.records, PRODUCER_ID_AT)
    )
    state = partition.log.producer_state
    return state.is_verified(producer_id, guard) or state.has_ongoing_txn(
        producer_id, producer_epoch
    )
