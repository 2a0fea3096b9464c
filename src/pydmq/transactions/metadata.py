"""The state of one transactional id (Kafka's TransactionMetadata and TransactionState).

Sans-IO values: a :class:`TransactionMetadata` is immutable; a write computes the next one with
:meth:`TransactionMetadata.transition_to`, which refuses a transition Kafka's state machine does
not allow, and the shard holds it only once the record carrying it is committed and replayed.
``last_producer_epoch`` (the epoch before the last bump, so that a retried InitProducerId is
recognised) is not in the record: a write replays it as built, a load starts without it (-1),
as in Kafka.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from pydmq.storage.api import TopicPartition
from pydmq.transactions.generated_records import PartitionsSchema, TransactionLogValue

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransitionError",
    "TransactionMetadata",
    "TransactionState",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_MAX_EPOCH = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: an epoch at ``Short.MAX_VALUE - 1`` or above cannot be bumped once more
    (one value is kept for the fence of a timed-out transaction)."""
    return epoch >= _MAX_EPOCH - 1


class TransactionState(enum.IntEnum):
    """Kafka's transaction states, with the ids of the ``transaction_status`` field."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use (``PrepareCommit``)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def by_kafka_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete_or_empty(self) -> bool:
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )


_BY_NAME = {state.kafka_name: state for state in TransactionState}

_S = TransactionState
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Empty, CompleteCommit, CompleteAbort: transactions v2 lets a client abort a transaction
    # that added nothing (its epoch is bumped all the same)
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
"""Kafka's ``TransactionState.validPreviousStates``. PrepareEpochFence is Kafka's pending state
while a zombie is fenced: it is never written (the fence writes PrepareAbort with the bumped
epoch), so it is never held either."""


class IllegalTransitionError(ValueError):
    """A transition the state machine does not allow (a coordinator bug, never a client's)."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    """One transactional id: its producer id and epoch, timeout, state, the partitions of its
    transaction and its timestamps (ms since the epoch; ``start_timestamp`` -1 when no
    transaction started)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    client_transaction_version: int = 0

    @classmethod
    def new(
        cls, transactional_id: str, producer_id: int, timeout_ms: int, now: int
    ) -> TransactionMetadata:
        """A transactional id seen for the first time (Empty, no epoch yet: not stored)."""
        return cls(
            transactional_id,
            producer_id,
            NO_PRODUCER_EPOCH,
            timeout_ms,
            TransactionState.EMPTY,
            frozenset(),
            -1,
            now,
        )

    def transition_to(self, state: TransactionState, **changes: object) -> TransactionMetadata:
        """The metadata after moving to ``state`` with ``changes``; raises
        :class:`IllegalTransitionError` for a move Kafka's state machine refuses."""
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransitionError(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        return dataclasses.replace(self, state=state, **changes)  # type: ignore[arg-type]

    def is_timed_out(self, now: int) -> bool:
        return (
            self.state is TransactionState.ONGOING and self.start_timestamp + self.timeout_ms < now
        )

    # -- the record ---------------------------------------------------------------------
    def to_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = tuple(
            PartitionsSchema(topic, tuple(sorted(ids))) for topic, ids in sorted(by_topic.items())
        )
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            # Kafka writes null partitions for Empty (which has none), the list otherwise
            transaction_partitions=None if self.state is TransactionState.EMPTY else partitions,
            transaction_last_update_timestamp_ms=self.last_update_timestamp,
            transaction_start_timestamp_ms=self.start_timestamp,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        partitions = frozenset(
            TopicPartition(p.topic, index)
            for p in value.transaction_partitions or ()
            for index in p.partition_ids
        )
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            TransactionState(value.transaction_status),
            partitions,
            value.transaction_start_timestamp_ms,
            value.transaction_last_update_timestamp_ms,
            value.previous_producer_id,
            value.next_producer_id,
            NO_PRODUCER_EPOCH,
            value.client_transaction_version,
        )
