"""What a transactional chaos workload observed: the input of :mod:`pydmq.chaos.txn_checker`.

Plain data, gathered by :mod:`pydmq.chaos.txn_workload` (or built by hand in the checker's
tests); the checker never talks to a broker. Times are ``time.monotonic()`` seconds of the
process that recorded them; a partition is named ``(topic, partition)``.

Every record a transaction writes carries a self-checking value naming its transaction
(:func:`txn_value`): the transactional id, the *incarnation* (the producer instance that
wrote it: a new instance for the same transactional id, e.g. after a crash or a fencing,
gets the next one, and with it the next producer epoch) and the transaction's sequence
number within that incarnation, plus the record's index in the transaction. So any record
read back names the transaction it belongs to, and two copies of one input's output written
by different incarnations are told apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydmq.chaos.history import TopicPartitionKey, decode_value, encode_value

__all__ = [
    "Isolation",
    "Transaction",
    "TxnHistory",
    "TxnKey",
    "TxnOutcome",
    "TxnRead",
    "TxnWrite",
    "txn_of",
    "txn_value",
]

Isolation = Literal["read_committed", "read_uncommitted"]
TxnOutcome = Literal["committed", "aborted", "indeterminate"]
#: (transactional id, incarnation, sequence number of the transaction in that incarnation)
TxnKey = tuple[str, int, int]


def txn_value(transactional_id: str, incarnation: int, seq: int, index: int) -> bytes:
    """The value of record ``index`` of transaction ``(transactional_id, incarnation, seq)``
    (the transactional id must not contain ``/``)."""
    return encode_value(f"{transactional_id}/{incarnation}/{seq}", index)


def txn_of(value: bytes | None) -> tuple[TxnKey, int] | None:
    """The transaction and index a :func:`txn_value` names; None for any other value."""
    decoded = decode_value(value)
    if decoded is None:
        return None
    writer, index = decoded
    parts = writer.split("/")
    if len(parts) != 3:
        return None
    tid, incarnation, seq = parts
    try:
        return (tid, int(incarnation), int(seq)), index
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """One record of a transaction: where it was sent, its value, and (consume-transform-
    produce) the identity of the input record it was derived from, ``"<topic>-<p>@<offset>"``
    (None for a record derived from no input)."""

    partition: TopicPartitionKey
    value: bytes
    source: str | None = None


@dataclass(slots=True)
class Transaction:
    """One transaction as its producer saw it.

    ``outcome``: ``committed`` (commit_transaction returned), ``aborted`` (abort_transaction
    returned) or ``indeterminate`` (the commit or abort raised, or the producer died before
    either: the transaction may have committed or not; a fenced producer's open transaction
    is one, Kafka aborts it). ``commit_requested_at`` is when commit_transaction was called
    (None if it never was).
    """

    transactional_id: str
    incarnation: int
    seq: int
    writes: list[TxnWrite]
    began_at: float
    outcome: TxnOutcome = "indeterminate"
    commit_requested_at: float | None = None
    error: str | None = None

    @property
    def key(self) -> TxnKey:
        return (self.transactional_id, self.incarnation, self.seq)


@dataclass(frozen=True, slots=True)
class TxnRead:
    """One record returned to a reader (assigned consumer) while the run went on."""

    reader: str
    isolation: Isolation
    partition: TopicPartitionKey
    offset: int
    value: bytes | None
    at: float


@dataclass(slots=True)
class TxnHistory:
    """Everything a transactional run observed, handed to the checker at the end.

    ``reader_ends``: each reader's position per partition when it stopped (it had been
    returned, or had skipped, everything below). ``final_committed`` and
    ``final_uncommitted``: after every producer stopped, each output partition read from
    offset 0 to its end by a read_committed and a read_uncommitted consumer, as
    ``[(offset, value)]``.
    """

    started_at: float
    ended_at: float
    partitions: list[TopicPartitionKey]
    transactions: list[Transaction]
    reads: list[TxnRead]
    reader_ends: dict[str, dict[TopicPartitionKey, int]]
    final_committed: dict[TopicPartitionKey, list[tuple[int, bytes | None]]]
    final_uncommitted: dict[TopicPartitionKey, list[tuple[int, bytes | None]]]
    client_errors: list[str] = field(default_factory=list)
