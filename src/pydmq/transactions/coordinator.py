"""TransactionCoordinator: the transaction APIs on the shards of ``__transaction_state``.

Kafka's TransactionCoordinator over the coordinator runtime. Each transactional id lives in
its partition's :class:`~pydmq.transactions.shard.TransactionCoordinatorShard`; every change
is a write keyed by the transactional id (so it runs once the id's earlier writes are
committed and replayed, and computes from the state they left: no pending-state bookkeeping),
which returns the id's next :class:`~pydmq.transactions.metadata.TransactionMetadata` as its
record. The flows, as Kafka's (transactions v1; the epoch rules of v2 where the request says
so):

- **InitProducerId** with a transactional id: a new id gets a producer id and epoch 0; a known
  one is bumped (KIP-360: with the caller's producer id and epoch, a retry of the last bump
  answers the same epoch, any other epoch is PRODUCER_FENCED); an exhausted epoch takes a new
  producer id; an Ongoing transaction is first fenced and aborted (PrepareAbort at epoch + 1,
  Kafka's PrepareEpochFence path) and the answer is CONCURRENT_TRANSACTIONS until its abort
  completes; PrepareCommit/PrepareAbort answer CONCURRENT_TRANSACTIONS.
- **AddPartitionsToTxn / AddOffsetsToTxn**: producer id and epoch checked, partitions added,
  the state becomes Ongoing (start timestamp set by the first add).
- **EndTxn**: Ongoing becomes PrepareCommit/PrepareAbort; the answer is given once that record
  is committed, and the marker channel then writes the markers to every partition and, when
  all answered, the coordinator writes CompleteCommit/CompleteAbort. Retries of a completed
  or completing result answer NONE / CONCURRENT_TRANSACTIONS, the other result
  INVALID_TXN_STATE. EndTxn v5 is transactions v2 (KIP-890): the Prepare record bumps the
  epoch and the answer carries it; an abort at the current epoch of a transaction that added
  nothing (Empty, CompleteCommit, CompleteAbort) is a transaction too (PrepareAbort, epoch
  bumped, no marker), a commit of one INVALID_TXN_STATE; an EndTxn at the bumped epoch while
  the previous transaction's markers are written is CONCURRENT_TRANSACTIONS.
- **Timeouts** (:mod:`pydmq.transactions.timeouts`): timers per shard fence and abort
  Ongoing transactions older than their timeout, and write the tombstone of ids idle for
  ``transactional.id.expiration.ms``.
- **Load**: at election (or a single node's start) the partition is replayed; a transaction
  found in PrepareCommit/PrepareAbort resumes sending its markers.

Event-loop owned; writes are serialized per shard by the runtime.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from pydmq.coordinator.api import CoordinatorError, CoordinatorLog, CoordinatorResult
from pydmq.coordinator.runtime import CoordinatorRuntime, WriteOperation
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.groups.consumer.topic_regex import RegexSyntaxError, TopicRegex, compile_topic_regex
from pydmq.producers.id_manager import ProducerIdBlockError
from pydmq.protocol.errors import ErrorCode
from pydmq.storage.api import TopicPartition
from pydmq.transactions.api import (
    DescribedTransaction,
    ListedTransaction,
    ProducerIdAndEpoch,
    TransactionConfig,
)
from pydmq.transactions.log import TRANSACTION_STATE_TOPIC
from pydmq.transactions.markers import TransactionMarkerChannel, TxnMarkers
from pydmq.transactions.metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from pydmq.transactions.outcome import WriteOutcome, fence, no_write
from pydmq.transactions.records import TransactionRecord, TransactionRecordSerde
from pydmq.transactions.shard import TransactionCoordinatorShard
from pydmq.transactions.timeouts import TransactionTimeouts

__all__ = [
    "ProducerIds",
    "TransactionCoordinator",
    "TransactionStateLogPort",
]

log = logging.getLogger(__name__)

_S = TransactionState
_TRANSACTIONS_V2 = 2
_COMPLETE_RETRY_S = 1.0

_WRITE_ERRORS: dict[int, int] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}
"""A failed write of ``__transaction_state`` as the transaction APIs answer it (Kafka's
TransactionStateManager mapping of the append's error)."""


def write_error(code: int) -> int:
    """The answer of a transaction API whose write failed with ``code``."""
    return _WRITE_ERRORS.get(code, code)


class TransactionStateLogPort(CoordinatorLog, Protocol):
    """``__transaction_state`` as the coordinator uses it (the runtime's log port, plus the
    partition of an id and whether the topic exists)."""

    @property
    def num_partitions(self) -> int: ...

    @property
    def exists(self) -> bool:
        """Whether the topic exists (a single node creates it on first use)."""
        ...

    def partition_for(self, transactional_id: str) -> int: ...


class ProducerIds(Protocol):
    """New producer ids (the broker's ``ProducerIdSource``); raises, or the awaitable
    raises, :class:`~pydmq.producers.id_manager.ProducerIdBlockError`."""

    def generate_producer_id(self) -> int | Awaitable[int]: ...


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _valid_producer_id(md: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: a caller naming its producer id and epoch is fenced unless the id is new (no
    epoch yet), the producer id is the current one (its epoch is checked by the bump), or it is
    the previous one at an exhausted epoch (a retry of the bump that rotated the id)."""
    return (
        md.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == md.producer_id
        or (producer_id == md.previous_producer_id and is_epoch_exhausted(producer_epoch))
    )


class TransactionCoordinator:
    """Transactional ids of this node over the shards of its ``__transaction_state``
    partitions; owned by the event loop."""

    def __init__(
        self,
        config: TransactionConfig,
        state_log: TransactionStateLogPort,
        producer_ids: ProducerIds,
        markers: TransactionMarkerChannel,
        offsets_partition: Callable[[str], int],
        *,
        owns_all_partitions: bool,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.config = config
        self._log = state_log
        self._producer_ids = producer_ids
        self._markers = markers
        self._offsets_partition = offsets_partition
        self._owns_all = owns_all_partitions
        self._clock = clock
        self._started = False
        self._runtime: CoordinatorRuntime[TransactionCoordinatorShard, TransactionRecord] = (
            CoordinatorRuntime(
                TRANSACTION_STATE_TOPIC, state_log, TransactionRecordSerde(), self._build_shard
            )
        )
        self._retries: set[asyncio.TimerHandle] = set()
        self._timeouts = TransactionTimeouts(config, self._runtime, clock, self._after_write)

    # -- ownership ---------------------------------------------------------------------
    def _build_shard(
        self, partition: int, timer: CoordinatorTimer[TransactionCoordinatorShard]
    ) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(partition, timer, self)

    def load(self) -> None:
        """A single node: load every partition before serving (none while the topic does
        not exist: a partition is loaded on first use then). Cluster mode: nothing (see
        :meth:`on_elected`)."""
        if not self._owns_all or not self._log.exists:
            return
        for partition in range(self._log.num_partitions):
            self._runtime.load_now(partition)

    def start(self) -> None:
        """The node serves: loaded shards start their timers and resume their markers."""
        self._started = True
        for partition in self._runtime.active_partitions():
            self._runtime.read(partition, self._start_shard)

    def stop(self) -> None:
        """The node stops: markers in flight stop, every shard is dropped."""
        self._started = False
        self._markers.cancel_all()
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        self._runtime.close()

    def on_elected(self, partition: int, leader_epoch: int) -> asyncio.Task[None] | None:
        """This broker leads ``__transaction_state`` partition ``partition`` at
        ``leader_epoch``: load it in the background (cluster mode)."""
        if self._owns_all:
            return None
        return self._runtime.schedule_load(partition, leader_epoch)

    def on_resigned(self, partition: int, leader_epoch: int | None = None) -> None:
        """This broker no longer leads ``partition`` (a follower at ``leader_epoch``, or the
        replica is gone: None): drop its shard, whose markers stop."""
        if not self._owns_all:
            self._runtime.schedule_unload(partition, leader_epoch)

    def shard_loaded(self, shard: TransactionCoordinatorShard) -> None:
        log.info(
            "%s-%d: %d transactional ids", TRANSACTION_STATE_TOPIC, shard.partition, len(shard)
        )
        if self._started or not self._owns_all:
            self._start_shard(shard)

    def shard_unloaded(self, shard: TransactionCoordinatorShard) -> None:
        self._markers.cancel_all(md.transactional_id for md in shard)

    def _start_shard(self, shard: TransactionCoordinatorShard) -> None:
        """Timers of the shard, and the markers of its transactions left in Prepare."""
        self._timeouts.start(shard)
        for md in shard:
            if md.state.is_prepare and not self._markers.in_flight(md.transactional_id):
                log.info(
                    "%s: resuming the %s markers of producer %d",
                    md.transactional_id,
                    "COMMIT" if md.state is _S.PREPARE_COMMIT else "ABORT",
                    md.producer_id,
                )
                self._send_markers(shard.partition, md)

    def _partition(self, transactional_id: str) -> int:
        partition = self._log.partition_for(transactional_id)
        if self._owns_all:
            self._runtime.load_now(partition)
        return partition

    # -- InitProducerId ----------------------------------------------------------------
    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> ProducerIdAndEpoch:
        """InitProducerId with a transactional id (``producer_id``/``producer_epoch``: the
        caller's, KIP-360; -1 when none)."""
        if not transactional_id:
            return ProducerIdAndEpoch.error(ErrorCode.INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return ProducerIdAndEpoch.error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        partition = self._partition(transactional_id)
        try:
            current = self._runtime.read(partition, lambda shard: shard.get(transactional_id))
        except CoordinatorError as exc:
            return ProducerIdAndEpoch.error(exc.error_code)
        fresh: int | None = None
        if current is None or is_epoch_exhausted(current.producer_epoch):
            try:
                generated = self._producer_ids.generate_producer_id()
                fresh = generated if isinstance(generated, int) else await generated
            except ProducerIdBlockError as exc:
                return ProducerIdAndEpoch.error(exc.error_code)
        expected = (producer_id, producer_epoch) if producer_id >= 0 else None

        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
            return self._init_operation(shard, transactional_id, timeout_ms, expected, fresh)

        return await self._write(partition, transactional_id, operation)

    def _init_operation(
        self,
        shard: TransactionCoordinatorShard,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        fresh: int | None,
    ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
        now = self._clock()
        md = shard.get(transactional_id)
        if md is None:
            if fresh is None:
                return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)  # expired meanwhile: retry
            md = TransactionMetadata.new(transactional_id, fresh, timeout_ms, now)
        if expected is not None and not _valid_producer_id(md, *expected):
            return no_write(ErrorCode.PRODUCER_FENCED)
        if md.state is _S.ONGOING:
            # Abort it first, fencing its producer; the caller retries until it completed.
            fenced = fence(md, now)
            outcome = WriteOutcome(
                ProducerIdAndEpoch.error(ErrorCode.CONCURRENT_TRANSACTIONS), fenced
            )
            return CoordinatorResult([TransactionRecord(transactional_id, fenced)], outcome)
        if not md.state.is_complete_or_empty:
            return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)
        common: dict[str, Any] = {
            "timeout_ms": timeout_ms,
            "partitions": frozenset(),
            "start_timestamp": -1,
            "last_update_timestamp": now,
        }
        if is_epoch_exhausted(md.producer_epoch) and (
            expected is None or expected[1] == md.producer_epoch
        ):
            if fresh is None:
                return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)
            new = md.transition_to(
                _S.EMPTY,
                producer_id=fresh,
                producer_epoch=0,
                previous_producer_id=md.producer_id,
                next_producer_id=-1,
                last_producer_epoch=md.producer_epoch
                if expected is not None
                else NO_PRODUCER_EPOCH,
                **common,
            )
        else:
            bumped = self._bumped_epoch(md, None if expected is None else expected[1])
            if bumped is None:
                return no_write(ErrorCode.PRODUCER_FENCED)
            epoch, last_epoch = bumped
            new = md.transition_to(
                _S.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch, **common
            )
        answer = ProducerIdAndEpoch(ErrorCode.NONE, new.producer_id, new.producer_epoch)
        return CoordinatorResult([TransactionRecord(transactional_id, new)], WriteOutcome(answer))

    @staticmethod
    def _bumped_epoch(
        md: TransactionMetadata, expected_epoch: int | None
    ) -> tuple[int, int] | None:
        """Kafka's prepareIncrementProducerEpoch: (epoch, last epoch) after the bump; the
        same epoch for a retry of the last bump; None when the caller is fenced."""
        bumped = md.producer_epoch + 1
        if expected_epoch is None:
            return bumped, NO_PRODUCER_EPOCH
        if md.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == md.producer_epoch:
            return bumped, md.producer_epoch
        if expected_epoch == md.last_producer_epoch:
            return md.producer_epoch, md.last_producer_epoch
        return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------
    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        transaction_version: int = 0,
    ) -> int:
        """Add ``partitions`` to the ongoing transaction: its error code. Transactions v2
        (``transaction_version`` 2: a partition leader adding the partition of a produce,
        KIP-890) records the client's version; a producer going on with the next producer id
        of an exhausted epoch is told CONCURRENT_TRANSACTIONS until the rotation completed."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        wanted = frozenset(partitions)
        partition = self._partition(transactional_id)
        status = self._runtime.status(partition)
        if status:
            return status

        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
            now = self._clock()
            md = shard.get(transactional_id)
            if _rotating_to(md, producer_id, producer_epoch):
                return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)
            code = _check_producer(md, producer_id, producer_epoch)
            if code or md is None:
                return no_write(code or ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            if md.state is _S.ONGOING and wanted <= md.partitions:
                return no_write(ErrorCode.NONE)
            if md.state is not _S.ONGOING and not md.state.is_complete_or_empty:
                return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)
            start = md.start_timestamp if md.state is _S.ONGOING else now
            changes: dict[str, Any] = {}
            if transaction_version >= _TRANSACTIONS_V2:
                changes["client_transaction_version"] = _TRANSACTIONS_V2
            new = md.transition_to(
                _S.ONGOING,
                partitions=md.partitions | wanted,
                start_timestamp=start,
                last_update_timestamp=now,
                **changes,
            )
            outcome = WriteOutcome(ProducerIdAndEpoch(ErrorCode.NONE))
            return CoordinatorResult([TransactionRecord(transactional_id, new)], outcome)

        return (await self._write(partition, transactional_id, operation)).error_code

    async def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> int:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction (where TxnOffsetCommit writes its offsets)."""
        tp = TopicPartition("__consumer_offsets", self._offsets_partition(group_id))
        return await self.add_partitions(transactional_id, producer_id, producer_epoch, [tp])

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn ``verify_only`` (a partition leader checking a transactional
        produce, KIP-890): NONE for each partition in the ongoing transaction, else
        INVALID_TXN_STATE; the id's error for all of them when it has one."""
        wanted = list(partitions)

        def all_of(code: int) -> dict[TopicPartition, int]:
            return dict.fromkeys(wanted, code)

        if not transactional_id:
            return all_of(ErrorCode.INVALID_REQUEST)
        try:
            md = self._runtime.read(
                self._partition(transactional_id), lambda shard: shard.get(transactional_id)
            )
        except CoordinatorError as exc:
            return all_of(exc.error_code)
        if _rotating_to(md, producer_id, producer_epoch):
            return all_of(ErrorCode.CONCURRENT_TRANSACTIONS)
        code = _check_producer(md, producer_id, producer_epoch)
        if code or md is None:
            return all_of(code or ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if md.state.is_prepare:
            return all_of(ErrorCode.CONCURRENT_TRANSACTIONS)
        ongoing = md.partitions if md.state is _S.ONGOING else frozenset()
        return {
            tp: ErrorCode.NONE if tp in ongoing else ErrorCode.INVALID_TXN_STATE for tp in wanted
        }

    # -- EndTxn --------------------------------------------------------------------------
    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        transaction_version: int = 0,
    ) -> ProducerIdAndEpoch:
        """EndTxn: the error code and the producer id and epoch the client goes on with
        (bumped by transactions v2, ``transaction_version`` 2: EndTxn v5; a bump that
        exhausts the epoch moves the id to a new producer id at epoch 0, as Kafka's)."""
        if not transactional_id:
            return ProducerIdAndEpoch.error(ErrorCode.INVALID_REQUEST)
        partition = self._partition(transactional_id)
        try:
            current = self._runtime.read(partition, lambda shard: shard.get(transactional_id))
        except CoordinatorError as exc:
            return ProducerIdAndEpoch.error(exc.error_code)
        v2 = transaction_version >= _TRANSACTIONS_V2
        fresh: int | None = None
        if v2 and current is not None and is_epoch_exhausted(current.producer_epoch):
            try:
                generated = self._producer_ids.generate_producer_id()
                fresh = generated if isinstance(generated, int) else await generated
            except ProducerIdBlockError as exc:
                return ProducerIdAndEpoch.error(exc.error_code)

        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
            md = shard.get(transactional_id)
            if md is None:
                return no_write(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            # transactions v2 retries: of the bump (the epoch before it), or of the bump that
            # moved the id to a new producer id (the previous producer id)
            rotated = v2 and producer_id == md.previous_producer_id and producer_id >= 0
            if md.producer_id != producer_id and not rotated:
                return no_write(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            retry = rotated or (
                v2 and producer_epoch == md.last_producer_epoch and md.state is not _S.ONGOING
            )
            if producer_epoch != md.producer_epoch and not retry:
                return no_write(ErrorCode.PRODUCER_FENCED)
            return self._end_operation(md, committed, v2, retry, fresh)

        return await self._write(partition, transactional_id, operation)

    def _end_operation(
        self,
        md: TransactionMetadata,
        committed: bool,
        v2: bool,
        retry: bool,
        fresh: int | None,
    ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
        if md.next_producer_id >= 0:  # rotating: the client goes on with the next id
            current = ProducerIdAndEpoch(ErrorCode.NONE, md.next_producer_id, 0)
        else:
            current = ProducerIdAndEpoch(ErrorCode.NONE, md.producer_id, md.producer_epoch)
        state = md.state
        # transactions v2 (Kafka's endTransaction for TV2): an abort of a transaction that
        # added no partition (Empty, or the previous transaction Complete: its produces were
        # all refused, or never sent) is a transaction too; it bumps the epoch
        abortable_empty = v2 and not committed and state.is_complete_or_empty
        if (state is _S.ONGOING or abortable_empty) and not retry:
            now = self._clock()
            changes: dict[str, Any] = {"last_update_timestamp": now}
            if state is not _S.ONGOING:
                changes["start_timestamp"] = now
            if v2:  # KIP-890: every EndTxn bumps the epoch
                if is_epoch_exhausted(md.producer_epoch) and fresh is None:
                    return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)  # raced: retry
                changes.update(
                    producer_epoch=md.producer_epoch + 1,
                    last_producer_epoch=md.producer_epoch,
                    client_transaction_version=_TRANSACTIONS_V2,
                )
                if is_epoch_exhausted(md.producer_epoch):
                    changes["next_producer_id"] = fresh
            prepared = md.transition_to(
                _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT, **changes
            )
            if prepared.next_producer_id >= 0:
                answer = ProducerIdAndEpoch(ErrorCode.NONE, prepared.next_producer_id, 0)
            else:
                answer = ProducerIdAndEpoch(
                    ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch
                )
            record = TransactionRecord(md.transactional_id, prepared)
            return CoordinatorResult([record], WriteOutcome(answer, prepared))
        if v2 and state.is_prepare and not retry:
            # transactions v2: the next transaction's EndTxn, at the epoch the previous one's
            # EndTxn answered, while the previous one's markers are still written: retried
            # until it completed (then an abort bumps the epoch, a commit of nothing is refused)
            return no_write(ErrorCode.CONCURRENT_TRANSACTIONS)
        same = {
            _S.COMPLETE_COMMIT: committed,
            _S.COMPLETE_ABORT: not committed,
            _S.PREPARE_COMMIT: committed,
            _S.PREPARE_ABORT: not committed,
        }
        if not same.get(state, False) or (v2 and not retry):
            # transactions v2: a commit at the current epoch of a completed transaction
            # commits nothing (Kafka's INVALID_TXN_STATE); only a retry answers its result
            return no_write(ErrorCode.INVALID_TXN_STATE)
        code = (
            ErrorCode.NONE
            if state in (_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
            else ErrorCode.CONCURRENT_TRANSACTIONS
        )
        answer = ProducerIdAndEpoch(code, current.producer_id, current.producer_epoch)
        return CoordinatorResult((), WriteOutcome(answer))

    # -- markers -------------------------------------------------------------------------
    def _send_markers(self, partition: int, prepared: TransactionMetadata) -> None:
        owned = self._runtime.partitions().get(partition)
        if owned is None:
            return
        markers = TxnMarkers(
            transactional_id=prepared.transactional_id,
            producer_id=prepared.producer_id,
            producer_epoch=prepared.producer_epoch,
            committed=prepared.state is _S.PREPARE_COMMIT,
            coordinator_epoch=owned[0],
            transaction_version=prepared.client_transaction_version,
            partitions=prepared.partitions,
        )
        self._markers.send(markers, lambda sent, ok: self._markers_done(partition, sent, ok))

    def _markers_done(self, partition: int, markers: TxnMarkers, delivered: bool) -> None:
        if not delivered:
            return  # a newer coordinator completes it
        transactional_id = markers.transactional_id

        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, None]:
            md = shard.get(transactional_id)
            expected = _S.PREPARE_COMMIT if markers.committed else _S.PREPARE_ABORT
            if (
                md is None
                or md.state is not expected
                or md.producer_id != markers.producer_id
                or md.producer_epoch != markers.producer_epoch
            ):
                return CoordinatorResult((), None)  # completed or changed meanwhile
            changes: dict[str, Any] = {}
            if md.next_producer_id >= 0:  # the epoch is exhausted: on to the next producer id
                changes = {
                    "producer_id": md.next_producer_id,
                    "producer_epoch": 0,
                    "previous_producer_id": md.producer_id,
                    "next_producer_id": -1,
                    "last_producer_epoch": NO_PRODUCER_EPOCH,
                }
            complete = md.transition_to(
                _S.COMPLETE_COMMIT if markers.committed else _S.COMPLETE_ABORT,
                partitions=frozenset(),
                last_update_timestamp=self._clock(),
                **changes,
            )
            return CoordinatorResult([TransactionRecord(transactional_id, complete)], None)

        write = self._runtime.schedule_write(partition, operation, key=transactional_id)
        write.add_done_callback(lambda done: self._completion_settled(partition, markers, done))

    def _completion_settled(
        self, partition: int, markers: TxnMarkers, write: asyncio.Future[None]
    ) -> None:
        error = write.exception() if not write.cancelled() else None
        if error is None:
            return
        code = error.error_code if isinstance(error, CoordinatorError) else -1
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return  # the partition moved: its next leader resumes the transaction at load
        log.warning(
            "%s: writing the completion failed (%s): retrying", markers.transactional_id, error
        )
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def retry() -> None:
            self._retries.discard(handle)
            self._markers_done(partition, markers, True)

        handle = loop.call_later(_COMPLETE_RETRY_S, retry)
        self._retries.add(handle)

    # -- writes --------------------------------------------------------------------------
    async def _write(
        self,
        partition: int,
        transactional_id: str,
        operation: WriteOperation[TransactionCoordinatorShard, WriteOutcome],
    ) -> ProducerIdAndEpoch:
        """Run ``operation`` keyed by the id; once its records are committed, a Prepare it
        wrote starts its markers (whatever becomes of the request that asked)."""
        write = self._runtime.schedule_write(partition, operation, key=transactional_id)
        write.add_done_callback(lambda done: self._after_write(partition, done))
        try:
            outcome = await asyncio.shield(write)
        except CoordinatorError as exc:
            return ProducerIdAndEpoch.error(write_error(exc.error_code))
        return outcome.answer

    def _after_write(self, partition: int, write: asyncio.Future[WriteOutcome]) -> None:
        if write.cancelled() or write.exception() is not None:
            return
        prepared = write.result().prepared
        if prepared is not None:
            self._send_markers(partition, prepared)

    # -- reads ---------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> DescribedTransaction:
        """DescribeTransactions of one id."""
        if not transactional_id:
            return DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        try:
            md = self._runtime.read(
                self._partition(transactional_id), lambda shard: shard.get(transactional_id)
            )
        except CoordinatorError as exc:
            return DescribedTransaction(transactional_id, exc.error_code)
        if md is None or md.state is _S.DEAD:
            return DescribedTransaction(transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return DescribedTransaction(
            transactional_id,
            ErrorCode.NONE,
            md.state.kafka_name,
            md.timeout_ms,
            md.start_timestamp,
            md.producer_id,
            md.producer_epoch,
            tuple(sorted(md.partitions, key=lambda tp: (tp.topic, tp.partition))),
        )

    def list_transactions(
        self,
        states: Iterable[str],
        producer_ids: Iterable[int],
        duration_ms: int = -1,
        transactional_id_pattern: str | None = None,
    ) -> tuple[int, list[str], list[ListedTransaction]]:
        """ListTransactions: (error, the unknown state names, the ids matching every filter)
        over the partitions led here; COORDINATOR_LOAD_IN_PROGRESS while one loads. The
        pattern (KIP-1152; null or empty: none) has RE2/J's syntax and must match the whole
        id, as Kafka's; INVALID_REGULAR_EXPRESSION for one RE2/J refuses."""
        pattern: TopicRegex | None = None
        if transactional_id_pattern:
            try:
                pattern = compile_topic_regex(transactional_id_pattern)
            except RegexSyntaxError:
                return ErrorCode.INVALID_REGULAR_EXPRESSION, [], []
        wanted_states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in states:
            state = TransactionState.by_kafka_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted_states.add(state)
        wanted_ids = set(producer_ids)
        if self._runtime.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknown, []
        now = self._clock()
        listed: list[ListedTransaction] = []
        for partition in self._runtime.active_partitions():
            for md in self._runtime.read(partition, list):
                if md.state is _S.DEAD:
                    continue
                if wanted_ids and md.producer_id not in wanted_ids:
                    continue
                if (wanted_states or unknown) and md.state not in wanted_states:
                    continue
                if duration_ms >= 0 and now - md.start_timestamp <= duration_ms:
                    continue
                if pattern is not None and not pattern.fullmatch(md.transactional_id):
                    continue
                listed.append(
                    ListedTransaction(md.transactional_id, md.producer_id, md.state.kafka_name)
                )
        return ErrorCode.NONE, unknown, listed


def _rotating_to(md: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> bool:
    """Whether ``producer_id`` at ``producer_epoch`` is the next producer id an EndTxn of
    transactions v2 gave the client at an exhausted epoch, while that transaction's markers
    are still being written (it becomes the id's producer id at completion)."""
    return (
        md is not None
        and md.state.is_prepare
        and md.next_producer_id >= 0
        and producer_id == md.next_producer_id
        and producer_epoch == 0
    )


def _check_producer(md: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> int:
    """The error of a request naming ``producer_id``/``producer_epoch`` for ``md``."""
    if md is None or md.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if md.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE
