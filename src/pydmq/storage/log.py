"""UnifiedLog: engine-agnostic log logic over one engine :class:`PartitionLog`.

Validates produced batches, assigns offsets in place, keeps idempotent-producer state, the
high watermark and the leader-epoch cache, and refines timestamp lookups to single records.
Transactions: a leader appends COMMIT/ABORT markers (:meth:`UnifiedLog.append_marker_as_leader`),
every replica applies them (:mod:`pydmq.storage.transactions`), and the log answers its
last stable offset and the aborted transactions of a read range.
A follower appends the leader's batches unchanged (:meth:`UnifiedLog.append_as_follower`) and
truncates a diverging tail found with OffsetForLeaderEpoch (:meth:`UnifiedLog.truncate_to`).
Engines only store bytes. Owned by the broker's event loop.

Checkpoint files (high watermark, producer snapshot, leader epochs) are written through
:meth:`UnifiedLog._write_checkpoint`, which numbers every write: the periodic pass may hand
its writes to a :class:`~pydmq.storage.checkpoint_writer.CheckpointWriter` thread
(:meth:`UnifiedLog.maybe_checkpoint`), and a queued write never replaces a newer one of the
same file. Engines opt in with ``checkpoints_thread_safe = True`` on their logs.

Storage failures. An append the engine could not store raises :class:`LogStorageError`
(KAFKA_STORAGE_ERROR) and leaves this log's state as it was: producer state, leader-epoch
cache, log end offset. Only when the batch did reach the log before the failure (a flush
after it failed, taking the log dir offline) is the producer state updated to match the log,
and the append is still not acknowledged. A checkpoint write that fails keeps the old file,
logs one ERROR (until it succeeds again) and is retried by the next checkpoint pass; the
producer snapshot is not written while the leader-epoch file lags behind (a restart replays
the batches after the snapshot to learn the epochs the file lacks).
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import struct
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass

from pydmq.producers.state import ProducerStateManager
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import (
    BatchHeader,
    CorruptRecordError,
    SimpleRecord,
    build_batch,
    build_end_txn_marker,
    decode_records,
    has_record_without_key,
    iter_record_timestamps,
    parse_batch_header,
    patch_offsets,
    read_frame_length,
    set_log_append_time,
    validate_batch,
)
from pydmq.storage.api import (
    AbortedTxn,
    FetchDataInfo,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    TimestampAndOffset,
)
from pydmq.storage.checkpoint_writer import CheckpointWriter
from pydmq.storage.errors import KafkaStorageError, is_transient
from pydmq.storage.transactions import TransactionTracker, end_txn_marker

__all__ = [
    "AppendOrigin",
    "LogAppendError",
    "LogAppendInfo",
    "LogStorageError",
    "UnexpectedAppendOffsetError",
    "UnifiedLog",
]

log = logging.getLogger(__name__)

_PRODUCER_SNAPSHOT = "producer-state"
_LEADER_EPOCHS = "leader-epoch-checkpoint"
_HIGH_WATERMARK = "high-watermark"
_HWM = struct.Struct(">q")
# Records a timestamp lookup walks between two of its steps (a few ms of work here).
RECORDS_PER_STEP = 5_000
# A lookup's steps: each yields how many records it walked; the generator returns the answer.
LookupSteps = Generator[int, None, "TimestampAndOffset | None"]


class LogAppendError(Exception):
    """An append refused with a Kafka error code (the partition's produce response)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class LogStorageError(LogAppendError):
    """An append the storage failed (KAFKA_STORAGE_ERROR); ``offline`` when the failure took
    the log dir ``log_dir`` offline (no later append to it can succeed before a restart)."""

    def __init__(self, message: str, log_dir: str, *, offline: bool) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)
        self.log_dir = log_dir
        self.offline = offline

    @staticmethod
    def of(exc: BaseException) -> LogStorageError:
        """The error for ``exc``, a KafkaStorageError or an engine's own OSError."""
        if isinstance(exc, KafkaStorageError):
            return LogStorageError(exc.message, exc.log_dir, offline=exc.offline)
        return LogStorageError(f"storage failed: {exc}", "", offline=not is_transient(exc))


class UnexpectedAppendOffsetError(LogAppendError):
    """A follower append whose first offset is below the log end offset (it overlaps the log).

    The replica fetcher truncates (OffsetForLeaderEpoch) and fetches again; Kafka raises
    UnexpectedAppendOffsetException in the same place.
    """

    def __init__(self, message: str, first_offset: int, log_end_offset: int) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)
        self.first_offset = first_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """Where an append landed. ``duplicate`` means an idempotent retry of a stored batch."""

    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class AppendPolicy:
    """The topic configs an append checks, resolved once per topic (not per request)."""

    max_message_bytes: int
    log_append_time: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    flush_messages: int
    target_compression: int | None = None  # None: keep the producer's codec
    max_decompressed_bytes: int = 64 * 1024 * 1024


class AppendOrigin(enum.Enum):
    """Who appends as leader (Kafka's AppendOrigin): a client's produce, or a coordinator of
    this node writing its internal topic (its transactional batches carry no sequence, which
    a client's may not). Transaction markers (control batches) are appended by neither: only
    through :meth:`UnifiedLog.append_marker_as_leader`."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class UnifiedLog:
    """One partition's log: validation, offsets, producer state and epochs over an engine log."""

    def __init__(self, log: PartitionLog, producer_id_expiration_ms: int = 86400000) -> None:
        self.engine_log = log
        self.producer_state = ProducerStateManager()
        self.transactions = TransactionTracker(log)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._unflushed = 0
        self.leader_epochs: list[tuple[int, int]] = []  # (epoch, start offset)
        # Checkpoint writes are numbered; a file keeps the highest-numbered write that landed.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = 0
        self._checkpoint_landed: dict[str, int] = {}
        self._checkpoint_sink: CheckpointWriter | None = None
        # The epoch file on disk is absent or holds no entry; then the cache may hold entries
        # not written yet (see maybe_assign_epoch_start_offset).
        self._epochs_saved_empty = True
        self._epochs_unsaved = False
        self._epochs_write_failed = False  # the file lags behind the cache: rewrite it
        self._checkpoints_failing: set[str] = set()  # names whose last write failed (logged)
        self._append_failing = False  # the last append failed (logged once per episode)
        self._load_leader_epochs()
        # The offset the producer snapshot on disk covers (0 without one), so that a state
        # replayed past it at open is written by the next checkpoint: the start after that
        # replays nothing (a log of many small batches replays ~7 us per batch).
        self._snapshot_end = self._load_producer_state()
        self.high_watermark = self._load_high_watermark()
        self._checkpointed_hw = self.high_watermark

    # -- offsets ---------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.engine_log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.engine_log.log_end_offset

    @property
    def latest_epoch(self) -> int:
        return self.leader_epochs[-1][0] if self.leader_epochs else -1

    # -- append ----------------------------------------------------------------------
    def append_as_leader(
        self,
        records: memoryview,
        leader_epoch: int,
        policy: AppendPolicy,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Validate one produced record set (of ``origin``) and append it; raises
        LogAppendError."""
        now_ms = int(time.time() * 1000)
        headers = self._validate(records, policy, now_ms, origin)
        target = policy.target_compression
        if target is not None and headers[0].compression != target:
            records, headers = self._recompress(records, headers[0], target, policy)
        state = self.producer_state
        if len(headers) == 1 and headers[0].producer_id >= 0:
            check = state.check_and_prepare(headers[0], now_ms)
            if check.duplicate_of is not None:
                dup = check.duplicate_of
                return LogAppendInfo(
                    dup.first_offset, dup.last_offset, -1, self.log_start_offset, duplicate=True
                )
            if check.error_code:
                raise LogAppendError(check.error_code, check.message)
        base = self.engine_log.log_end_offset
        offset = base
        append_time = -1
        for header in headers:
            patch_offsets(records, header, offset, leader_epoch)
            if policy.log_append_time:
                append_time = now_ms
                set_log_append_time(records, header, now_ms)
            offset += header.last_offset_delta + 1
        shifted = [parse_batch_header(records, h.position) for h in headers]
        epochs = self._epochs_before(leader_epoch, base)
        self.maybe_assign_epoch_start_offset(leader_epoch, base)
        try:
            self.engine_log.append(records, shifted)
        except (KafkaStorageError, OSError) as exc:
            raise self._append_failed(exc, base, epochs, shifted, now_ms, records) from exc
        for header in shifted:
            if header.producer_id >= 0:
                state.update(header, header.base_offset, header.last_offset, now_ms)
        if self._append_failing:
            self._append_succeeded()
        self._unflushed += 1
        if self._unflushed >= policy.flush_messages:
            self._flush_after_append()
        return LogAppendInfo(base, offset - 1, append_time, self.log_start_offset)

    def append_marker_as_leader(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        leader_epoch: int,
        flush_messages: int | None = None,
        transaction_version: int = 0,
    ) -> LogAppendInfo:
        """Append one COMMIT/ABORT control batch (WriteTxnMarkers) and complete the
        producer's transaction; raises LogAppendError (INVALID_PRODUCER_EPOCH for an older
        producer epoch, or a late one of transactions v2, ``transaction_version`` 2: see
        :meth:`~pydmq.producers.state.ProducerStateManager.check_end_txn`;
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch, and storage errors as
        :meth:`append_as_leader`)."""
        state = self.producer_state
        error = state.check_end_txn(
            producer_id, producer_epoch, coordinator_epoch, transaction_version
        )
        if error:
            raise LogAppendError(
                error,
                f"marker of producer {producer_id} at epoch {producer_epoch} (coordinator "
                f"epoch {coordinator_epoch}) is fenced",
            )
        now_ms = int(time.time() * 1000)
        base = self.engine_log.log_end_offset
        view = memoryview(
            build_end_txn_marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                commit=commit,
                coordinator_epoch=coordinator_epoch,
                base_offset=base,
                partition_leader_epoch=leader_epoch,
                timestamp=now_ms,
            )
        )
        headers = [parse_batch_header(view, 0)]
        epochs = self._epochs_before(leader_epoch, base)
        self.maybe_assign_epoch_start_offset(leader_epoch, base)
        try:
            self.engine_log.append(view, headers)
        except (KafkaStorageError, OSError) as exc:
            raise self._append_failed(exc, base, epochs, headers, now_ms, view) from exc
        self._apply_appended(headers, now_ms, view)
        if self._append_failing:
            self._append_succeeded()
        self._unflushed += 1
        if flush_messages is not None and self._unflushed >= flush_messages:
            self._flush_after_append()
        return LogAppendInfo(base, base, -1, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of any unstable transaction, high watermark) (Kafka's LSO)."""
        return self.transactions.last_stable_offset(
            self.producer_state, self.high_watermark, self.log_start_offset
        )

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping ``[start_offset, upper_bound_offset)``."""
        return self.engine_log.collect_aborted_txns(start_offset, upper_bound_offset)

    def _epochs_before(self, epoch: int, start_offset: int) -> tuple[object, ...] | None:
        """What :meth:`_restore_epochs` needs to undo the epoch an append assigns; None when
        the append assigns nothing (the common case: the latest epoch, started earlier)."""
        epochs = self.leader_epochs
        if epochs and epochs[-1][0] == epoch and epochs[-1][1] <= start_offset:
            return None
        return (list(epochs), self._epochs_saved_empty, self._epochs_unsaved)

    def _append_failed(
        self,
        exc: BaseException,
        base: int,
        epochs: tuple[object, ...] | None,
        headers: list[BatchHeader],
        now_ms: int,
        records: memoryview,
    ) -> LogStorageError:
        """Make this log's state match what the failed append left in the engine's log."""
        if self.engine_log.log_end_offset > base:
            # The batches are in the log (what failed came after them): state must say so.
            self._apply_appended(headers, now_ms, records)
        elif epochs is not None:
            cache, saved_empty, unsaved = epochs
            assert isinstance(cache, list)
            changed = cache != self.leader_epochs
            self.leader_epochs = cache
            self._epochs_saved_empty, self._epochs_unsaved = bool(saved_empty), bool(unsaved)
            if changed and not self._epochs_unsaved:
                self._save_leader_epochs()  # the file got the undone entry: take it back
        error = LogStorageError.of(exc)
        if not self._append_failing:  # one line per episode, not one per refused produce
            self._append_failing = True
            log.log(
                logging.ERROR if error.offline else logging.WARNING,
                "append at offset %d failed (later failures are not logged until one succeeds): %s",
                base,
                error.message,
            )
        return error

    def _append_succeeded(self) -> None:
        self._append_failing = False
        log.info("appends at offset %d succeed again", self.log_end_offset)

    def _apply_appended(self, headers: list[BatchHeader], now_ms: int, records: memoryview) -> None:
        """The producer state (and, for markers, the transactions) after appending the
        batches ``headers`` found at their positions in ``records``."""
        state = self.producer_state
        for header in headers:
            if header.producer_id >= 0:
                if header.is_control:
                    marker = end_txn_marker(records, header)
                    if marker is not None:
                        self.transactions.apply_marker(state, header, marker, now_ms)
                        continue
                state.update(header, header.base_offset, header.last_offset, now_ms)
            elif header.last_offset >= state.map_end_offset:
                state.map_end_offset = header.last_offset + 1

    def _flush_after_append(self) -> None:
        """``flush.messages`` reached: fsync before acknowledging; a failure refuses the ack."""
        try:
            self.flush()
        except (KafkaStorageError, OSError) as exc:
            raise LogStorageError.of(exc) from exc

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, flush_messages: int | None = None
    ) -> LogAppendInfo | None:
        """Append batches fetched from the leader with its offsets and leader epochs unchanged.

        Each batch's framing and CRC are checked (a follower must not store a corrupt copy),
        offsets must increase from at least the log end offset, the leader-epoch cache learns
        each batch's ``partitionLeaderEpoch`` and the producer state is updated. Producer
        sequences are not enforced: the leader validated them and a follower cannot refuse
        the leader's log (Kafka only warns here too). An incomplete trailing batch (a fetch
        cut at max bytes) is ignored. Returns None when no complete batch was given.
        """
        view = memoryview(records)
        headers: list[BatchHeader] = []
        position = 0
        end = len(view)
        next_offset = self.engine_log.log_end_offset
        try:
            while position < end:
                frame = read_frame_length(view, position)
                if frame is None or position + frame[1] > end:
                    break
                header = parse_batch_header(view, position)
                validate_batch(view, header, from_client=False)
                if header.base_offset < next_offset:
                    raise UnexpectedAppendOffsetError(
                        f"follower append at {header.base_offset} below the expected offset "
                        f"{next_offset}",
                        header.base_offset,
                        self.engine_log.log_end_offset,
                    )
                next_offset = header.next_offset
                headers.append(header)
                position += header.size
        except CorruptRecordError as exc:
            raise LogAppendError(exc.error_code, str(exc)) from None
        if not headers:
            return None
        if position < end:
            view = view[:position]
        base = self.engine_log.log_end_offset
        epochs: tuple[object, ...] | None = (
            list(self.leader_epochs),
            self._epochs_saved_empty,
            self._epochs_unsaved,
        )
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch >= 0:
                self.maybe_assign_epoch_start_offset(epoch, header.base_offset)
        now_ms = int(time.time() * 1000)
        try:
            self.engine_log.append(view, headers)
        except (KafkaStorageError, OSError) as exc:
            raise self._append_failed(exc, base, epochs, headers, now_ms, view) from exc
        self._apply_appended(headers, now_ms, view)
        if self._append_failing:
            self._append_succeeded()
        self._unflushed += 1
        if flush_messages is not None and self._unflushed >= flush_messages:
            self._flush_after_append()
        return LogAppendInfo(
            headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset
        )

    def _validate(
        self, records: memoryview, policy: AppendPolicy, now_ms: int, origin: AppendOrigin
    ) -> list[BatchHeader]:
        headers: list[BatchHeader] = []
        position = 0
        end = len(records)
        try:
            while position < end:
                header = parse_batch_header(records, position)
                if header.size > policy.max_message_bytes:
                    raise LogAppendError(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        f"batch of {header.size} bytes exceeds max.message.bytes "
                        f"{policy.max_message_bytes}",
                    )
                validate_batch(records, header)
                if (
                    origin is AppendOrigin.CLIENT
                    and header.is_transactional
                    and header.base_sequence < 0
                ):
                    # Kafka's LogValidator: a client's batch with a producer id needs a
                    # sequence (only a coordinator's transactional batch comes without one)
                    raise LogAppendError(
                        ErrorCode.INVALID_RECORD,
                        f"invalid sequence number {header.base_sequence} in a transactional "
                        f"record batch of producer {header.producer_id}",
                    )
                if not policy.log_append_time and header.records_count > 0:
                    ts = header.max_timestamp
                    if ts - now_ms > policy.timestamp_after_max_ms or (
                        now_ms - ts > policy.timestamp_before_max_ms
                    ):
                        raise LogAppendError(
                            ErrorCode.INVALID_TIMESTAMP,
                            f"timestamp {ts} outside the allowed range around {now_ms}",
                        )
                headers.append(header)
                position += header.size
        except CorruptRecordError as exc:
            # the subclass carries Kafka's code: INVALID_RECORD, MESSAGE_TOO_LARGE, CORRUPT_MESSAGE
            raise LogAppendError(exc.error_code, str(exc)) from None
        if not headers:
            raise LogAppendError(ErrorCode.INVALID_RECORD, "produce request without a batch")
        if len(headers) > 1:
            raise LogAppendError(
                ErrorCode.INVALID_RECORD,
                "Produce v3+ requests carry exactly one record batch per partition",
            )
        if self._compacted():
            self._require_keys(records, headers[0], policy)
        return headers

    def _compacted(self) -> bool:
        """cleanup.policy has compact (the engine log's LogConfig, as the built-in engines
        keep it in ``config``)."""
        config = getattr(self.engine_log, "config", None)
        return isinstance(config, LogConfig) and config.compact

    def _require_keys(self, records: memoryview, header: BatchHeader, policy: AppendPolicy) -> None:
        """Kafka's LogValidator: a compacted topic refuses a record without a key (each
        record's key length is read for it, on compacted topics only)."""
        try:
            keyless = has_record_without_key(
                records, header, max_decompressed=policy.max_decompressed_bytes
            )
        except CorruptRecordError as exc:
            raise LogAppendError(exc.error_code, str(exc)) from None
        if keyless:
            tp = getattr(self.engine_log, "tp", None)  # both built-in engines know theirs
            raise LogAppendError(
                ErrorCode.INVALID_RECORD,
                f"Compacted topic cannot accept message without key in topic partition {tp}.",
            )

    @staticmethod
    def _recompress(
        records: memoryview, header: BatchHeader, codec: int, policy: AppendPolicy
    ) -> tuple[memoryview, list[BatchHeader]]:
        """Re-encode a batch with the topic's ``compression.type`` (not ``producer``)."""
        try:
            decoded = decode_records(
                records, header, max_decompressed=policy.max_decompressed_bytes
            )
        except CorruptRecordError as exc:
            raise LogAppendError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
        rebuilt = build_batch(
            [SimpleRecord(r.key, r.value, r.headers, r.timestamp) for r in decoded],
            compression=codec,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            is_transactional=header.is_transactional,
        )
        view = memoryview(bytearray(rebuilt))
        return view, [parse_batch_header(view, 0)]

    # -- reads -----------------------------------------------------------------------
    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> FetchDataInfo:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        if offset >= max_offset:
            return FetchDataInfo.empty(offset)
        return self.engine_log.read(offset, max_bytes, max_offset, min_one_batch)

    def _batch_bytes(self, base_offset: int) -> bytes:
        data = self.engine_log.read(base_offset, 1, self.log_end_offset, True)
        return b"".join(bytes(b) for b in data.buffers)

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` (Kafka's offsetsForTimes)."""
        return _run_steps(self.offset_by_timestamp_steps(timestamp))

    def offset_by_timestamp_steps(self, timestamp: int) -> LookupSteps:
        """:meth:`fetch_offset_by_timestamp` as steps: yields the number of records walked
        every :data:`RECORDS_PER_STEP` (a handler gives the loop back between them: a stored
        batch may hold millions of tiny compressed records) and returns the answer."""
        candidate = self.engine_log.fetch_offset_by_timestamp(timestamp)
        batch = self._candidate_batch(candidate)
        if batch is None:
            return candidate
        buf, header = batch
        if header.is_log_append_time:
            return TimestampAndOffset(
                header.max_timestamp,
                max(header.base_offset, self.log_start_offset),
                header.partition_leader_epoch,
            )
        for chunk in _chunks(buf, header):
            for offset, record_timestamp in chunk:
                if record_timestamp >= timestamp and offset >= self.log_start_offset:
                    return TimestampAndOffset(
                        record_timestamp, offset, header.partition_leader_epoch
                    )
            if len(chunk) == RECORDS_PER_STEP:
                yield RECORDS_PER_STEP
        return candidate

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (ListOffsets -3, KIP-734)."""
        return _run_steps(self.max_timestamp_steps())

    def max_timestamp_steps(self) -> LookupSteps:
        """:meth:`max_timestamp_and_offset` as steps (see :meth:`offset_by_timestamp_steps`)."""
        candidate = self.engine_log.max_timestamp_and_offset()
        batch = self._candidate_batch(candidate)
        if batch is None:
            return candidate
        buf, header = batch
        if header.is_log_append_time:
            return TimestampAndOffset(
                header.max_timestamp, header.last_offset, header.partition_leader_epoch
            )
        best: TimestampAndOffset | None = None
        for chunk in _chunks(buf, header):
            for offset, record_timestamp in chunk:
                if best is None or record_timestamp > best.timestamp:
                    best = TimestampAndOffset(
                        record_timestamp, offset, header.partition_leader_epoch
                    )
            if len(chunk) == RECORDS_PER_STEP:
                yield RECORDS_PER_STEP
        return best or candidate

    def _candidate_batch(
        self, candidate: TimestampAndOffset | None
    ) -> tuple[bytes | memoryview, BatchHeader] | None:
        """The stored batch holding the engine's candidate record (None without one)."""
        if candidate is None:
            return None
        buf = self._batch_bytes(candidate.offset)
        return buf, parse_batch_header(buf, 0)

    # -- leader epochs ---------------------------------------------------------------
    def maybe_assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's LeaderEpochFileCache.assign).

        Nothing changes when ``epoch`` is already the latest and starts at or before
        ``start_offset`` (every append of the current epoch: this is on the produce path).
        Otherwise entries that would no longer be monotonic (an epoch >= ``epoch`` or a start
        >= ``start_offset``) are dropped first, so an epoch that never got a record gives way
        to the one that did.

        The cache is written at once (file and directory fsynced), except while the file on
        disk holds no entry (a new log, or one truncated fully): then an entry at the log end
        stays in memory until the first checkpoint or flush that finds a batch in the log
        (:meth:`_settle_leader_epochs`). Creating a topic thus fsyncs nothing per partition.
        It is safe because what such an entry describes survives without it: while the file
        is empty, every producer snapshot is written after the entries (so the snapshot's
        offset never skips a batch whose epoch is not on disk), and a start replays the
        batches after the snapshot and learns an epoch above the latest known from the first
        batch that carries it (as Kafka's recovery does). An entry lost with no batch under it
        is harmless: the next leader election assigns it again.
        """
        epochs = self.leader_epochs
        if epochs:
            latest, latest_start = epochs[-1]
            if latest == epoch and latest_start <= start_offset:
                return
        if epoch < 0:
            return
        while epochs and (epochs[-1][0] >= epoch or epochs[-1][1] >= start_offset):
            epochs.pop()
        epochs.append((epoch, start_offset))
        if self._epochs_saved_empty and start_offset >= self.log_end_offset:
            self._epochs_unsaved = True
            return
        self._save_leader_epochs()

    def _settle_leader_epochs(self) -> int:
        """Write the entries kept in memory once a batch lies at or after the first of them;
        returns 1 if the file was written. Called before every checkpoint and flush."""
        epochs = self.leader_epochs
        if self._epochs_write_failed or (
            self._epochs_unsaved and epochs and self.log_end_offset > epochs[0][1]
        ):
            self._save_leader_epochs()
            return 1
        return 0

    def _learn_epochs(self, headers: Iterator[BatchHeader]) -> Iterator[BatchHeader]:
        """Pass ``headers`` (the batches replayed at open) through, assigning any epoch above
        the latest known from the first batch that carries it."""
        learnt = False
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch > self.latest_epoch:
                epochs = self.leader_epochs
                start = header.base_offset
                while epochs and (epochs[-1][0] >= epoch or epochs[-1][1] >= start):
                    epochs.pop()
                epochs.append((epoch, start))
                learnt = True
            yield header
        if learnt:
            if self._epochs_saved_empty:
                self._epochs_unsaved = True
            else:
                self._save_leader_epochs()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, with Kafka's rules.

        - the latest epoch: (epoch, log end offset);
        - an older epoch: (the largest known epoch <= ``epoch``, the start offset of the next
          higher known epoch), which is where the two logs may start to diverge;
        - an epoch below every known one: (``epoch``, start offset of the first known epoch),
          as the data before it was deleted and the follower may replicate from there;
        - ``-1``, an epoch above the latest, or an empty cache: (-1, -1) (UNDEFINED).
        """
        epochs = self.leader_epochs
        if epoch < 0 or not epochs:
            return -1, -1
        if epoch == epochs[-1][0]:
            return epoch, self.log_end_offset
        floor = -1
        for known, start in epochs:
            if known > epoch:
                return (floor if floor >= 0 else epoch), start
            floor = known
        return -1, -1

    def _save_leader_epochs(self) -> None:
        data = json.dumps({"version": 1, "epochs": self.leader_epochs}).encode()
        self._write_checkpoint(_LEADER_EPOCHS, data)
        self._epochs_saved_empty = not self.leader_epochs
        self._epochs_unsaved = False

    def _load_leader_epochs(self) -> None:
        data = self.engine_log.read_checkpoint(_LEADER_EPOCHS)
        if data:
            epochs = json.loads(data)["epochs"]
            self._epochs_saved_empty = not epochs
            end = self.log_end_offset
            self.leader_epochs = [(int(e), int(s)) for e, s in epochs if int(s) <= end]

    # -- producer state --------------------------------------------------------------
    def _load_producer_state(self) -> int:
        """Load the snapshot and replay the batches after it; returns what the snapshot covers."""
        snapshot = self.engine_log.read_checkpoint(_PRODUCER_SNAPSHOT)
        start = self.log_start_offset
        covered = 0
        if snapshot:
            try:
                covered = self.producer_state.load_snapshot(snapshot, self.log_end_offset)
                start = max(start, covered)
            except ValueError:
                self.producer_state = ProducerStateManager()
                covered = 0
        self.transactions.replay(
            self.producer_state,
            self._learn_epochs(self.engine_log.batch_headers(start)),
            self._batch_bytes,
        )
        return covered

    def take_producer_snapshot(self) -> None:
        self._settle_leader_epochs()  # first: the snapshot's offset bounds the replay at open
        self._snapshot_end = self.producer_state.map_end_offset  # first: a failure resets it
        self._write_checkpoint(_PRODUCER_SNAPSHOT, self.producer_state.snapshot())

    def maybe_checkpoint(
        self, writer: CheckpointWriter | None = None, *, producer_snapshot: bool = True
    ) -> int:
        """Write the leader epochs kept in memory (once the log has a batch under them), the
        high-watermark checkpoint and (with ``producer_snapshot``) the producer snapshot, each
        only if it changed since its last write; returns how many files were written (each
        costs two fsyncs).

        With ``writer`` (and an engine whose checkpoint writes are thread-safe) the content
        is captured now and the writes run on the writer's thread, in this order."""
        if writer is not None and getattr(self.engine_log, "checkpoints_thread_safe", False):
            self._checkpoint_sink = writer
        try:
            written = self._settle_leader_epochs()
            if self.high_watermark != self._checkpointed_hw:
                self.checkpoint_high_watermark()
                written += 1
            if producer_snapshot and self.producer_state.map_end_offset != self._snapshot_end:
                self.take_producer_snapshot()
                written += 1
            return written
        finally:
            self._checkpoint_sink = None

    def _write_checkpoint(self, name: str, data: bytes) -> None:
        self._checkpoint_seq += 1
        sink = self._checkpoint_sink
        if sink is None:
            self._store_checkpoint(name, data, self._checkpoint_seq)
        else:
            sink.submit(functools.partial(self._store_checkpoint, name, data, self._checkpoint_seq))

    def _store_checkpoint(self, name: str, data: bytes, seq: int) -> None:
        """Write checkpoint ``name`` unless a newer write of it landed (any thread).

        A failed write is logged (once until one succeeds again) and marked to be retried by
        the next checkpoint pass; it never raises: the old file stays as it was."""
        with self._checkpoint_lock:
            if seq < self._checkpoint_landed.get(name, 0):
                return
            if getattr(self.engine_log, "closed", False):
                return  # closed (or deleted) since the write was queued
            if name == _PRODUCER_SNAPSHOT and self._epochs_write_failed:
                # The snapshot's offset bounds the replay that relearns epochs at open: it
                # must not get ahead of an epoch file that lacks entries.
                self._snapshot_end = -1
                return
            try:
                self.engine_log.write_checkpoint(name, data)
            except (KafkaStorageError, OSError) as exc:
                self._checkpoint_failed(name, exc)
                return
            self._checkpoint_landed[name] = seq
            if name == _LEADER_EPOCHS:
                self._epochs_write_failed = False
            if name in self._checkpoints_failing:
                self._checkpoints_failing.discard(name)
                log.info("checkpoint %s written again", name)

    def _checkpoint_failed(self, name: str, exc: BaseException) -> None:
        """Mark ``name`` to be written by the next checkpoint pass; log the first failure."""
        if name == _LEADER_EPOCHS:
            self._epochs_write_failed = True
        elif name == _PRODUCER_SNAPSHOT:
            self._snapshot_end = -1
        elif name == _HIGH_WATERMARK:
            self._checkpointed_hw = -1
        if name not in self._checkpoints_failing:
            self._checkpoints_failing.add(name)
            log.error("checkpoint %s not written (the old one stays): %s", name, exc)

    # -- high watermark --------------------------------------------------------------
    def _load_high_watermark(self) -> int:
        data = self.engine_log.read_checkpoint(_HIGH_WATERMARK)
        if data and len(data) == _HWM.size:
            value: int = _HWM.unpack(data)[0]
            return min(max(value, self.log_start_offset), self.log_end_offset)
        return self.log_start_offset

    def update_high_watermark(self, offset: int) -> bool:
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        if offset != self.high_watermark:
            self.high_watermark = offset
            return True
        return False

    def checkpoint_high_watermark(self) -> None:
        self._checkpointed_hw = self.high_watermark  # first: a failed write resets it
        self._write_checkpoint(_HIGH_WATERMARK, _HWM.pack(self.high_watermark))

    # -- maintenance -----------------------------------------------------------------
    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        changed = self.engine_log.maybe_increment_log_start_offset(offset)
        if self.high_watermark < self.log_start_offset:
            self.high_watermark = self.log_start_offset
        return changed

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after ``offset`` (a follower's diverging tail).

        The engine truncates at a batch boundary, so an offset inside a batch removes that whole
        batch. Then the epoch cache drops the epochs starting at or after the new log end
        offset, the producer state is rebuilt for the shorter log (from the last snapshot if it
        does not reach past it, else from the log start) and re-snapshotted, and the high
        watermark is capped at the new log end offset. Returns whether the log changed.
        """
        truncated = offset < self.log_end_offset
        if truncated:
            self.engine_log.truncate_to(offset)
        end = self.log_end_offset
        if self.leader_epochs and self.leader_epochs[-1][1] >= end:
            self.leader_epochs = [(e, s) for e, s in self.leader_epochs if s < end]
            self._save_leader_epochs()
        if truncated or self.producer_state.map_end_offset > end:
            self._reload_producer_state()
            self.take_producer_snapshot()
        if self.high_watermark > end:
            self.high_watermark = end
        return truncated

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and restart it empty at ``offset`` (a follower whose fetch offset
        fell below the leader's log start). Epochs, producer state and the high watermark
        restart with it."""
        self.engine_log.truncate_fully_and_start_at(offset)
        self.leader_epochs = []
        self._save_leader_epochs()
        self.producer_state = ProducerStateManager()
        self.producer_state.map_end_offset = offset
        self.transactions.reset()
        self.take_producer_snapshot()
        self.high_watermark = offset

    def _reload_producer_state(self) -> None:
        state = ProducerStateManager()
        start = self.log_start_offset
        snapshot = self.engine_log.read_checkpoint(_PRODUCER_SNAPSHOT)
        if snapshot:
            try:
                covered = state.load_snapshot(snapshot, 2**63 - 1)
            except ValueError:
                covered = -1
            if 0 <= covered <= self.log_end_offset:
                start = max(start, covered)
            else:  # the snapshot reaches into the removed tail: replay the whole log
                state = ProducerStateManager()
        self.transactions.reset()
        self.transactions.replay(state, self.engine_log.batch_headers(start), self._batch_bytes)
        self.producer_state = state

    def delete_old_segments(self, now_ms: int) -> int:
        deleted = self.engine_log.delete_retention_ms_breached(now_ms)
        deleted += self.engine_log.delete_retention_size_breached()
        if self.high_watermark < self.log_start_offset:
            self.high_watermark = self.log_start_offset
        return deleted

    def flush(self) -> None:
        self._settle_leader_epochs()
        self.engine_log.flush()
        self._unflushed = 0

    def close_for_deletion(self) -> None:
        """Close the engine log of a partition about to be deleted, without checkpointing.

        Taken under the checkpoint lock: a checkpoint write running on the checkpoint
        writer's thread finishes first, and a write queued behind it finds the log closed and
        skips. Deleting the directory under a write would fail it with ENOENT, which the
        engine must take for a failed disk (the whole log dir offline)."""
        with self._checkpoint_lock:
            self.engine_log.close()

    def close(self) -> None:
        """Checkpoint what changed since the last checkpoint, flush and close the engine log
        (closed even when the flush fails).

        A clean close leaves what a restart needs to skip recovery: every batch flushed (the
        engine's recovery point at the log end), the high watermark and the producer snapshot
        as they are now. Files whose content did not change are not rewritten: each rewrite
        costs a file and a directory fsync, and a broker closes every partition on shutdown.
        """
        self.maybe_checkpoint()
        try:
            self.engine_log.flush()
        except KafkaStorageError as exc:
            if not exc.offline:
                raise  # an offline log dir promises nothing more: closing is all there is
        finally:
            self.engine_log.close()


def _run_steps(steps: LookupSteps) -> TimestampAndOffset | None:
    """Run a lookup's steps to the end at once; its answer."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: TimestampAndOffset | None = done.value
            return result


def _chunks(buf: bytes | memoryview, header: BatchHeader) -> Iterator[list[tuple[int, int]]]:
    """The batch's (offset, timestamp) pairs in chunks of :data:`RECORDS_PER_STEP` (the last
    one shorter): a lookup gives the loop back after each full chunk."""
    chunk: list[tuple[int, int]] = []
    for pair in iter_record_timestamps(buf, header):
        chunk.append(pair)
        if len(chunk) == RECORDS_PER_STEP:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
