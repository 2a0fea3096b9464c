"""Idempotent producer state of one partition log (KIP-98; Kafka's ProducerStateManager).

Sans-IO and engine-agnostic. For every producer id that wrote to the partition the manager keeps
the current producer epoch and the metadata of the last :data:`NUM_BATCHES_TO_RETAIN` (5)
appended batches, enough to:

* answer a retried batch that is one of those 5 with the offsets of the original append
  (Kafka answers NONE with the original base offset; the batch is not appended again),
* reject a sequence gap with OUT_OF_ORDER_SEQUENCE_NUMBER,
* fence an older epoch with INVALID_PRODUCER_EPOCH.

Use on the leader, per batch and under the partition's append lock::

    check = state.check_and_prepare(header, now_ms)
    if check.is_duplicate: respond with check.duplicate_of.first_offset
    elif check.error_code: respond with check.error_code
    else: append, then state.update(header, first_offset, last_offset, now_ms)

Followers and recovery call :meth:`update` (or :meth:`rebuild_from`) without checks.
Transaction bookkeeping kept here (first offset of the ongoing transaction, coordinator epoch)
is what the last stable offset and snapshots need: :attr:`ProducerStateManager.ongoing_txns`
maps each producer id with an open transaction to its first offset (a small dict read on the
fetch path, so that the last stable offset costs nothing while no transaction is open). A
leader checks a COMMIT/ABORT marker with :meth:`check_end_txn` before appending it (an older
producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED), and every replica applies it with :meth:`complete_txn`.
A non-transactional batch from a producer whose transaction is open is INVALID_TXN_STATE, as
Kafka's ProducerAppendInfo.

Partition verification (KIP-890 part 1): while a leader asks the transaction coordinator
whether this partition is in a producer's transaction, the producer holds a
:class:`VerificationGuard` here (:meth:`start_verification`, Kafka's VerificationStateEntry
and its VerificationGuard), shared by every verification of that producer in flight. As in
Kafka, only an appended transactional batch of the producer removes it: a marker (so a first
batch verified before an abort and appended after it is refused, :meth:`is_verified` being
false, instead of opening a transaction nobody will end) or a data batch (its transaction is
then open here, and later batches need no guard). A refused verification leaves it: another
produce sharing it may have been verified. One marker leaves it (transactions v2, Kafka's
``isV2NextTransactionStarted``): the previous transaction's, which the coordinator writes at
the epoch it bumped, the epoch the producer's next transaction runs at; a guard of a
transactions v2 produce at that epoch is the next transaction's, verified while the marker was
written, not a zombie. While a guard is held, a batch of the producer must not start above the
lowest sequence its verifications saw (a later batch overtaking the first one, which was
refused) nor, for transactions v2, above 0 when the producer has no batch here
(OUT_OF_ORDER_SEQUENCE_NUMBER, retried by the client after the first batch).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from pydmq.protocol.batch_header import CONTROL_FLAG, TRANSACTIONAL_FLAG
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.features import TRANSACTIONS_V2
from pydmq.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader, crc32c

__all__ = [
    "APPEND_OK",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DUPLICATE_SEQUENCE_NUMBER",
    "INVALID_PRODUCER_EPOCH",
    "NUM_BATCHES_TO_RETAIN",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "UNKNOWN_PRODUCER_ID",
    "AppendCheck",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "ProducerStateSnapshotError",
    "VerificationGuard",
    "in_sequence",
]

NONE: Final = int(ErrorCode.NONE)
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = int(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
DUPLICATE_SEQUENCE_NUMBER: Final = int(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
INVALID_PRODUCER_EPOCH: Final = int(ErrorCode.INVALID_PRODUCER_EPOCH)
UNKNOWN_PRODUCER_ID: Final = int(ErrorCode.UNKNOWN_PRODUCER_ID)
TRANSACTION_COORDINATOR_FENCED: Final = int(ErrorCode.TRANSACTION_COORDINATOR_FENCED)
INVALID_TXN_STATE: Final = int(ErrorCode.INVALID_TXN_STATE)

NUM_BATCHES_TO_RETAIN: Final = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 86_400_000  # producer.id.expiration.ms
NO_PRODUCER_EPOCH: Final = -1
INT32_MAX: Final = 0x7FFFFFFF


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Kafka's rule: the next batch starts right after the last one, wrapping Int32 max to 0."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch (Kafka's BatchMetadata); a tuple for speed."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class AppendCheck:
    """Outcome of :meth:`ProducerStateManager.check_and_prepare`.

    ``error_code`` NONE and ``duplicate_of`` None: append the batch. ``duplicate_of`` set: the
    batch is a retry of an appended one; do not append, answer NONE with its offsets. Otherwise
    ``error_code`` is the Kafka error to answer with.
    """

    error_code: int = NONE
    duplicate_of: BatchMetadata | None = None
    message: str = ""

    @property
    def is_ok(self) -> bool:
        return self.error_code == NONE and self.duplicate_of is None

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None


APPEND_OK: Final = AppendCheck()


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id on one partition (Kafka's ProducerStateEntry)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first_seq = header.base_sequence
        last_seq = header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        if self.producer_epoch != producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch


def _check_txn_state(entry: ProducerStateEntry, header: BatchHeader) -> AppendCheck:
    """Kafka's rule after the epoch and sequence checks: while the producer's transaction is
    open, its batches must be transactional (whatever their epoch)."""
    if entry.current_txn_first_offset is not None and not header.is_transactional:
        return AppendCheck(
            INVALID_TXN_STATE,
            None,
            f"expected a transactional write from producer {entry.producer_id}: its "
            f"transaction started at offset {entry.current_txn_first_offset} is open",
        )
    return APPEND_OK


@dataclass(eq=False, slots=True)
class VerificationGuard:
    """The verification in flight of one producer on one partition (Kafka's
    VerificationStateEntry, its identity the VerificationGuard): the epoch and lowest sequence
    of the batches verified, and whether they are transactions v2 produces (the coordinator
    bumps the epoch at each transaction's end). Owned by the partition's producer state (event
    loop)."""

    producer_epoch: int
    lowest_sequence: int
    supports_epoch_bump: bool

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, producer_epoch: int) -> None:
        """A further batch verified under this guard: a newer epoch restarts the lowest
        sequence, a lower sequence at the same epoch lowers it."""
        if producer_epoch > self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.lowest_sequence = sequence
        elif producer_epoch == self.producer_epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence


def _check_verified_sequence(
    guard: VerificationGuard, entry: ProducerStateEntry | None, header: BatchHeader
) -> AppendCheck:
    """Kafka's sequence rules while a producer's verification is in flight: a transactions v2
    producer with no batch here starts at sequence 0, and no batch starts above the lowest
    sequence verified (it would overtake the batch the verification was for)."""
    first_seq = header.base_sequence
    producer_id = header.producer_id
    if guard.supports_epoch_bump and first_seq != 0 and (entry is None or not entry.batches):
        return AppendCheck(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            None,
            f"invalid sequence {first_seq} of producer {producer_id}: a transactions v2 "
            "producer with no batch here starts at 0",
        )
    if first_seq > guard.lowest_sequence:
        return AppendCheck(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            None,
            f"out of order sequence {first_seq} of producer {producer_id}: its transaction's "
            f"verification here started at sequence {guard.lowest_sequence}",
        )
    return APPEND_OK


class ProducerStateSnapshotError(ValueError):
    """A producer state snapshot that is truncated, of an unknown version or fails its CRC."""


# Snapshot layout (big-endian):
#   magic "PDPS" | version int16 | crc32c uint32 of everything after it |
#   map_end_offset int64 | entry count int32 | entries
# entry: producer_id int64 | producer_epoch int16 | coordinator_epoch int32 |
#        current_txn_first_offset int64 (-1 none) | last_timestamp int64 | batch count int8 |
#        batches: first_seq int32 | last_seq int32 | first_offset int64 | last_offset int64 |
#                 timestamp int64
_SNAPSHOT_MAGIC: Final = b"PDPS"
_SNAPSHOT_VERSION: Final = 1
_SNAPSHOT_HEADER = struct.Struct(">4shI")
_SNAPSHOT_BODY_HEADER = struct.Struct(">qi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqqb")
_SNAPSHOT_BATCH = struct.Struct(">iiqqq")


class ProducerStateManager:
    """Producer ids, epochs and recent sequence ranges of one partition log."""

    __slots__ = ("map_end_offset", "ongoing_txns", "producers", "verification_guards")

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # producer id -> the guard of its partition verifications (KIP-890), until its next
        # transactional batch or marker is appended; not in snapshots (leader only).
        self.verification_guards: dict[int, VerificationGuard] = {}
        # producer id -> first offset of its open transaction (every entry whose
        # current_txn_first_offset is set, and only those).
        self.ongoing_txns: dict[int, int] = {}
        # One past the last offset whose batch was applied: where a rebuild resumes.
        self.map_end_offset = 0

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- leader checks ---------------------------------------------------------------------------

    def check_and_prepare(self, header: BatchHeader, now_ms: int) -> AppendCheck:
        """Check a client batch's producer id, epoch and sequence before it is appended.

        Does not change the state (call :meth:`update` after the append). ``now_ms`` is
        accepted for future checks (KIP-890 verification); it is not used today.
        """
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return APPEND_OK
        entry = self.producers.get(producer_id)
        if entry is None:
            # No state (new producer, or its state expired or was deleted with the log
            # prefix): Kafka accepts any epoch and sequence, unless a verification is in
            # flight for the producer.
            guard = self.verification_guards.get(producer_id)
            if guard is None or header.is_control or header.base_sequence == NO_SEQUENCE:
                return APPEND_OK
            return _check_verified_sequence(guard, None, header)
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        batches = entry.batches
        # Fast path, the common case: same epoch, next sequence (cannot be a duplicate), no
        # verification in flight.
        if (
            epoch == entry.producer_epoch
            and batches
            and not header.attributes & CONTROL_FLAG
            and (entry.current_txn_first_offset is None or header.attributes & TRANSACTIONAL_FLAG)
            and not (self.verification_guards and producer_id in self.verification_guards)
        ):
            last_seq = batches[-1].last_seq
            if first_seq == last_seq + 1 or (first_seq == 0 and last_seq == INT32_MAX):
                return APPEND_OK
        return self._check_slow(entry, header)

    def _check_slow(self, entry: ProducerStateEntry, header: BatchHeader) -> AppendCheck:
        producer_id = entry.producer_id
        epoch = header.producer_epoch
        if header.is_control:
            if epoch < entry.producer_epoch:
                return AppendCheck(
                    INVALID_PRODUCER_EPOCH,
                    None,
                    f"control batch epoch {epoch} is older than current epoch "
                    f"{entry.producer_epoch} of producer {producer_id}",
                )
            return APPEND_OK
        duplicate = entry.find_duplicate_batch(header)
        if duplicate is not None:
            return AppendCheck(NONE, duplicate, "duplicate batch")
        if epoch < entry.producer_epoch:
            return AppendCheck(
                INVALID_PRODUCER_EPOCH,
                None,
                f"epoch {epoch} of producer {producer_id} is older than the current epoch "
                f"{entry.producer_epoch}",
            )
        first_seq = header.base_sequence
        if first_seq == NO_SEQUENCE and header.is_transactional:
            # A coordinator's transactional batch (TxnOffsetCommit offsets in
            # __consumer_offsets): no sequence, only the epoch is checked (Kafka checks
            # sequences of client batches only; a client batch with a producer id and no
            # sequence is refused before the log, as Kafka's LogValidator does).
            return APPEND_OK
        guard = self.verification_guards.get(producer_id)
        if guard is not None:
            verified = _check_verified_sequence(guard, entry, header)
            if verified.error_code:
                return verified
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                return AppendCheck(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    None,
                    f"invalid sequence {first_seq} for new epoch {epoch} of producer "
                    f"{producer_id}: a new epoch starts at 0",
                )
            return _check_txn_state(entry, header)
        if entry.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(entry.last_seq, first_seq):
            return _check_txn_state(entry, header)
        return AppendCheck(
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            None,
            f"out of order sequence {first_seq} of producer {producer_id} at epoch {epoch}: "
            f"expected {(entry.last_seq + 1) & INT32_MAX}",
        )

    # -- applying appended batches ----------------------------------------------------------------

    def update(self, header: BatchHeader, first_offset: int, last_offset: int, now_ms: int) -> None:
        """Record a batch appended at [first_offset, last_offset] (leader, follower, recovery).

        Control batches move the epoch but carry no sequence; use :meth:`complete_txn` for
        markers when their coordinator epoch and outcome are known.
        """
        if last_offset >= self.map_end_offset:
            self.map_end_offset = last_offset + 1
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        timestamp = header.max_timestamp
        if timestamp < 0:
            timestamp = now_ms
        if entry.producer_epoch != header.producer_epoch:
            entry.maybe_update_producer_epoch(header.producer_epoch)
        entry.last_timestamp = timestamp
        attributes = header.attributes
        if attributes & CONTROL_FLAG:
            entry.current_txn_first_offset = None
            self.ongoing_txns.pop(producer_id, None)
            self._end_verification(producer_id, header.producer_epoch)
            return
        base_sequence = header.base_sequence
        if base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(
                    base_sequence,
                    (base_sequence + header.last_offset_delta) & INT32_MAX,
                    first_offset,
                    last_offset,
                    timestamp,
                )
            )
        if attributes & TRANSACTIONAL_FLAG:
            # the transaction is open here now: its verification is done (Kafka's rule)
            self.verification_guards.pop(producer_id, None)
            if entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = first_offset
                self.ongoing_txns[producer_id] = first_offset

    def check_end_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        transaction_version: int = 0,
    ) -> int:
        """Whether a leader may append a COMMIT/ABORT marker (WriteTxnMarkers); a Kafka error
        code: INVALID_PRODUCER_EPOCH for an epoch older than the producer's current one,
        TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the last marker's.
        Changes nothing.

        Transactions v2 (``transaction_version`` 2, KIP-890): the coordinator bumps the epoch
        before it writes the markers, so a marker's epoch must be above the producer's
        current one; one at the current epoch is a late or duplicate marker, fenced while a
        transaction is open (it would end the producer's next transaction), accepted when
        none is (the retry of a marker that was written, as Kafka's KAFKA-19999)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return NONE
        current = entry.producer_epoch
        if producer_epoch < current or (
            transaction_version >= TRANSACTIONS_V2
            and producer_epoch == current
            and entry.current_txn_first_offset is not None
        ):
            return INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return TRANSACTION_COORDINATOR_FENCED
        return NONE

    def complete_txn(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        marker_offset: int,
        timestamp: int,
        *,
        check: bool = True,
    ) -> int:
        """Apply a COMMIT/ABORT marker written at ``marker_offset``; returns a Kafka error code.

        With ``check`` (the leader handling WriteTxnMarkers) a marker from an older producer
        epoch answers INVALID_PRODUCER_EPOCH and one from an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED, and nothing changes.
        """
        if check:
            error = self.check_end_txn(producer_id, producer_epoch, coordinator_epoch)
            if error:
                return error
        entry = self.producers.get(producer_id)
        if marker_offset >= self.map_end_offset:
            self.map_end_offset = marker_offset + 1
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(producer_id)
        entry.maybe_update_producer_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        self.ongoing_txns.pop(producer_id, None)
        self._end_verification(producer_id, producer_epoch)
        entry.last_timestamp = timestamp
        return NONE

    def _end_verification(self, producer_id: int, marker_epoch: int) -> None:
        """A marker of ``producer_id`` at ``marker_epoch`` was appended: its verification
        guard goes, unless it is a transactions v2 guard at the marker's epoch (the marker
        ends the previous transaction at the epoch the coordinator bumped; the guard is the
        next transaction's, Kafka's ``isV2NextTransactionStarted``)."""
        guard = self.verification_guards.get(producer_id)
        if guard is None:
            return
        if guard.supports_epoch_bump and guard.producer_epoch == marker_epoch:
            return
        del self.verification_guards[producer_id]

    # -- partition verification (KIP-890) ---------------------------------------------------------

    def has_ongoing_txn(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``producer_id`` has a transaction open here at ``producer_epoch`` (its
        transactional batches then need no verification)."""
        if producer_id not in self.ongoing_txns:
            return False
        entry = self.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == producer_epoch

    def start_verification(
        self,
        producer_id: int,
        producer_epoch: int,
        sequence: int,
        *,
        supports_epoch_bump: bool = False,
    ) -> VerificationGuard:
        """The guard of ``producer_id``'s verification of a batch at ``producer_epoch``
        starting at ``sequence``: the one in flight (concurrent produces of one producer share
        it; its epoch and lowest sequence follow the batch), else a new one.
        ``supports_epoch_bump``: a transactions v2 produce (Produce v12)."""
        guard = self.verification_guards.get(producer_id)
        if guard is None:
            guard = self.verification_guards[producer_id] = VerificationGuard(
                producer_epoch, sequence, supports_epoch_bump
            )
        else:
            guard.maybe_update_lowest_sequence_and_epoch(sequence, producer_epoch)
        return guard

    def is_verified(self, producer_id: int, guard: object) -> bool:
        """Whether ``guard`` is still ``producer_id``'s (none of its transactional batches or
        markers appended since it was started)."""
        return self.verification_guards.get(producer_id) is guard

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an ongoing transaction (bounds the last stable offset)."""
        ongoing = self.ongoing_txns
        return min(ongoing.values()) if ongoing else None

    def txn_first_offset(self, producer_id: int) -> int | None:
        """First offset of ``producer_id``'s open transaction (None: none open)."""
        return self.ongoing_txns.get(producer_id)

    def rebuild_from(self, headers: Iterable[BatchHeader]) -> None:
        """Replay batch headers in offset order (recovery), skipping those already applied."""
        for header in headers:
            if header.base_offset < self.map_end_offset:
                continue
            self.update(header, header.base_offset, header.last_offset, header.max_timestamp)

    # -- truncation and expiration --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Forget what was learnt from offsets >= ``offset`` (log truncation).

        Batches at or beyond ``offset`` are dropped; a producer left with no batch is removed
        (its epoch can only be known again by replaying the log, so, as Kafka does for a
        producer without state, it will be accepted at any sequence). For an exact result load
        the latest snapshot below ``offset`` and :meth:`rebuild_from` the log instead.
        """
        for producer_id in list(self.producers):
            entry = self.producers[producer_id]
            kept = [batch for batch in entry.batches if batch.last_offset < offset]
            if len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)
                if not kept:
                    del self.producers[producer_id]
                    self.ongoing_txns.pop(producer_id, None)
                    continue
            if (
                entry.current_txn_first_offset is not None
                and entry.current_txn_first_offset >= offset
            ):
                entry.current_txn_first_offset = None
                self.ongoing_txns.pop(producer_id, None)
        self.map_end_offset = min(self.map_end_offset, offset)

    def remove_expired(
        self, now_ms: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> list[int]:
        """Drop producers idle for ``producer.id.expiration.ms`` with no ongoing transaction."""
        expired = [
            producer_id
            for producer_id, entry in self.producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self.producers[producer_id]
        return expired

    # -- snapshots ------------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Versioned, CRC32C-protected binary image of the state (write it atomically)."""
        body = bytearray(_SNAPSHOT_BODY_HEADER.pack(self.map_end_offset, len(self.producers)))
        for entry in self.producers.values():
            body += _SNAPSHOT_ENTRY.pack(
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
                entry.last_timestamp,
                len(entry.batches),
            )
            for batch in entry.batches:
                body += _SNAPSHOT_BATCH.pack(
                    batch.first_seq,
                    batch.last_seq,
                    batch.first_offset,
                    batch.last_offset,
                    batch.timestamp,
                )
        header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, _SNAPSHOT_VERSION, crc32c(body))
        return header + bytes(body)

    def load_snapshot(self, data: bytes | bytearray | memoryview, up_to_offset: int) -> int:
        """Replace the state with a snapshot's, then drop anything at or beyond ``up_to_offset``.

        ``up_to_offset`` is the log end offset the snapshot is loaded for. Returns the offset
        where replaying the log (:meth:`rebuild_from`) must resume.
        """
        view = memoryview(data)
        if len(view) < _SNAPSHOT_HEADER.size + _SNAPSHOT_BODY_HEADER.size:
            raise ProducerStateSnapshotError("producer state snapshot is truncated")
        magic, version, crc = _SNAPSHOT_HEADER.unpack_from(view)
        if magic != _SNAPSHOT_MAGIC:
            raise ProducerStateSnapshotError("not a producer state snapshot")
        if version != _SNAPSHOT_VERSION:
            raise ProducerStateSnapshotError(
                f"unsupported producer state snapshot version {version}"
            )
        body = view[_SNAPSHOT_HEADER.size :]
        if crc32c(body) != crc:
            raise ProducerStateSnapshotError("producer state snapshot CRC mismatch")
        producers: dict[int, ProducerStateEntry] = {}
        try:
            map_end_offset, count = _SNAPSHOT_BODY_HEADER.unpack_from(body)
            position = _SNAPSHOT_BODY_HEADER.size
            for _ in range(count):
                producer_id, epoch, coordinator_epoch, txn_first, last_ts, n_batches = (
                    _SNAPSHOT_ENTRY.unpack_from(body, position)
                )
                position += _SNAPSHOT_ENTRY.size
                if not 0 <= n_batches <= NUM_BATCHES_TO_RETAIN:
                    raise ProducerStateSnapshotError(f"invalid batch count {n_batches}")
                entry = ProducerStateEntry(
                    producer_id,
                    epoch,
                    coordinator_epoch=coordinator_epoch,
                    current_txn_first_offset=None if txn_first < 0 else txn_first,
                    last_timestamp=last_ts,
                )
                for _b in range(n_batches):
                    entry.batches.append(
                        BatchMetadata(*_SNAPSHOT_BATCH.unpack_from(body, position))
                    )
                    position += _SNAPSHOT_BATCH.size
                producers[producer_id] = entry
        except struct.error as exc:
            raise ProducerStateSnapshotError("producer state snapshot is truncated") from exc
        if position != len(body):
            raise ProducerStateSnapshotError("trailing bytes after producer state snapshot")
        self.producers = producers
        self.ongoing_txns = {
            producer_id: entry.current_txn_first_offset
            for producer_id, entry in producers.items()
            if entry.current_txn_first_offset is not None
        }
        self.map_end_offset = map_end_offset
        if map_end_offset > up_to_offset:
            self.truncate_to(up_to_offset)
        return self.map_end_offset
