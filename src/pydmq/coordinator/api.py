"""The interface between the coordinator runtime, the coordinators built on it and the log.

A coordinator implements a :class:`CoordinatorShard` (the state of one internal-topic
partition, changed only by :meth:`CoordinatorShard.replay`) and expresses each write as an
operation returning a :class:`CoordinatorResult`: the records to append and the response to
give once they are committed. Records are the coordinator's own typed values; its
:class:`CoordinatorSerde` turns them into the key and value bytes of the topic and back (so a
write's records are replayed as built, never decoded again). The runtime reaches the partition
through a :class:`CoordinatorLog`, a narrow port over the broker's replica manager (or an
in-memory partition in tests).

Transactions are an opt-in on both sides (Kafka's transactional writes of the coordinator
runtime): a shard that implements :class:`TransactionalCoordinatorShard` (records of
transactional batches, with their producer id and epoch, and the COMMIT/ABORT markers that end
them) over a log that implements :class:`TransactionalCoordinatorLog` (appends a transactional
batch and a marker, and replays the partition batch by batch) can take
``CoordinatorRuntime.schedule_transactional_write`` and
``CoordinatorRuntime.schedule_transaction_completion``. A shard that does not is loaded and
written exactly as before, through :meth:`CoordinatorShard.replay` and
:meth:`CoordinatorLog.append`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterator, Sequence, Sized
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import Record

__all__ = [
    "CoordinatorBatch",
    "CoordinatorError",
    "CoordinatorLog",
    "CoordinatorRecord",
    "CoordinatorResult",
    "CoordinatorSerde",
    "CoordinatorShard",
    "CoordinatorWriteError",
    "HostedTopic",
    "TopicLookup",
    "TransactionResult",
    "TransactionalCoordinatorLog",
    "TransactionalCoordinatorShard",
]

R_co = TypeVar("R_co", covariant=True)
Rec = TypeVar("Rec")
Rec_co = TypeVar("Rec_co", covariant=True)
Rec_contra = TypeVar("Rec_contra", contravariant=True)

CoordinatorRecord = tuple[bytes, bytes | None]
"""One record of an internal topic as stored: key and value (None: a tombstone)."""


class HostedTopic(Protocol):
    """An internal topic as its node hosts it: how many partitions it has."""

    @property
    def partitions(self) -> Sized: ...


class TopicLookup(Protocol):
    """The node's topics by name (the internal topic's, once it exists)."""

    def get(self, name: str) -> HostedTopic | None: ...


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[Rec_co, R_co]):
    """What a write operation produced: ``records`` to append (possibly none) and the
    ``response`` completed once they are committed and replayed (Kafka's CoordinatorResult)."""

    records: Sequence[Rec_co]
    response: R_co


class CoordinatorSerde(Protocol[Rec]):
    """A coordinator's records <-> the key and value bytes of its internal topic."""

    def serialize(self, record: Rec) -> CoordinatorRecord: ...

    def deserialize(self, key: bytes | None, value: bytes | None) -> Rec | None:
        """The record stored as ``key``/``value``; None for one the coordinator skips (no
        key, or not decodable: logged)."""
        ...


class CoordinatorShard(Protocol[Rec_contra]):
    """The state a coordinator keeps for one internal-topic partition it leads.

    Owned by the runtime's shard: every call comes from the shard's event queue on the event
    loop. ``replay`` is the only way the state changes, for records loaded at election and for
    records of this node's writes once committed (the same code path)."""

    def replay(self, record: Rec_contra) -> None:
        """Apply one committed record."""

    def on_loaded(self) -> None:
        """The partition's records are replayed: the shard serves from now on."""

    def on_unloaded(self) -> None:
        """Leadership moved away (or the node stops): the shard is dropped after this call."""


class CoordinatorLog(Protocol):
    """The internal topic as the runtime uses it: appends as leader, reads at load."""

    def append(
        self, partition: int, records: Sequence[CoordinatorRecord]
    ) -> asyncio.Future[int] | None:
        """Append ``records`` to ``partition`` before returning (acks=-1 semantics).

        Raises :class:`CoordinatorWriteError` when nothing was appended. Returns None when the
        records are committed already (the high watermark passed them), else a future resolved
        with 0 once committed or with a produce error code once they cannot be (leadership
        lost, timeout). The runtime never cancels it."""
        ...

    def replay_partition(self, partition: int) -> Iterator[Record]:
        """The records of ``partition`` up to its log end offset, in offset order."""
        ...

    def await_committed(self, partition: int) -> asyncio.Future[int] | None:
        """Everything appended to ``partition`` so far being committed: None when it is
        already, else a future resolved with 0 once the high watermark reaches the log end
        offset of now (no timeout), or with NOT_LEADER_OR_FOLLOWER once this node stops
        leading the partition. The runtime never cancels it."""
        ...


class TransactionResult(enum.Enum):
    """How a transaction ended: the type of its end-transaction marker (control record)."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True, slots=True)
class CoordinatorBatch:
    """One record batch of an internal-topic partition, as a transactional shard is loaded
    from it: its producer id and epoch (-1 when none), whether it is transactional, and either
    its data ``records`` (``end_txn`` None) or, for a control batch, the result of the
    transaction its marker ends (``records`` empty)."""

    producer_id: int
    producer_epoch: int
    is_transactional: bool
    records: Sequence[Record]
    end_txn: TransactionResult | None = None


@runtime_checkable
class TransactionalCoordinatorShard(CoordinatorShard[Rec_contra], Protocol):
    """A shard that takes part in transactions (opt-in): the runtime replays the records of
    transactional batches and the end-transaction markers through these methods, at load and
    once such a write of this node is committed; every other record still goes to
    :meth:`CoordinatorShard.replay`. Owned by the runtime's shard event queue."""

    def replay_transactional(
        self, record: Rec_contra, producer_id: int, producer_epoch: int
    ) -> None:
        """Apply one committed record of a transactional batch of ``producer_id``."""

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: TransactionResult
    ) -> None:
        """Apply the committed COMMIT/ABORT marker of ``producer_id``'s transaction."""


@runtime_checkable
class TransactionalCoordinatorLog(CoordinatorLog, Protocol):
    """A :class:`CoordinatorLog` that also writes transactions (opt-in): transactional batches
    carrying a producer id and epoch, and the control batches ending them, appended as leader
    with the same commit rules as :meth:`CoordinatorLog.append` (the partition's producer
    state validates them: an older producer epoch is refused with INVALID_PRODUCER_EPOCH,
    raised as :class:`CoordinatorWriteError`); and a replay by batch."""

    def append_transactional(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_id: int,
        producer_epoch: int,
    ) -> asyncio.Future[int] | None:
        """Append ``records`` as transactional batches of ``producer_id`` at
        ``producer_epoch`` (no sequence numbers, as a coordinator appends them)."""
        ...

    def append_end_txn_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        transaction_version: int,
    ) -> asyncio.Future[int] | None:
        """Append the COMMIT/ABORT control batch of ``producer_id``'s transaction (of the
        transaction coordinator's ``transaction_version``: 2 fences a late marker)."""
        ...

    def replay_batches(self, partition: int) -> Iterator[CoordinatorBatch]:
        """The batches of ``partition`` up to its log end offset, in offset order, control
        batches included."""
        ...


class CoordinatorError(Exception):
    """An operation could not be served: ``error_code`` is NOT_COORDINATOR (the partition is
    not led here, or leadership moved before the write committed), COORDINATOR_LOAD_IN_PROGRESS
    (still loading), COORDINATOR_NOT_AVAILABLE (an unexpected failure), REQUEST_TIMED_OUT (a
    write that could not run within the runtime's write timeout) or the produce error of the
    append (callers map it to their API's error, as Kafka's coordinators do)."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code


class CoordinatorWriteError(Exception):
    """Raised by :meth:`CoordinatorLog.append` when nothing was appended; ``error_code`` is the
    produce error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR...)."""

    def __init__(self, error_code: int, message: str = "") -> None:
        super().__init__(message or ErrorCode(error_code).name)
        self.error_code = error_code
