"""CoordinatorRuntime: one shard per internal-topic partition led here (Kafka's runtime).

A coordinator (groups, transactions, share-partition state) keeps its state in the
partitions of an internal compacted topic. The runtime hosts one shard per partition this node
leads and owns everything that is not the coordinator's own logic:

- **Load and unload** on leadership changes. :meth:`CoordinatorRuntime.schedule_load` replays
  the partition's records into a new shard in the background (yielding to the loop every
  ``load_yield_records`` records); meanwhile operations fail with COORDINATOR_LOAD_IN_PROGRESS.
  :meth:`CoordinatorRuntime.load_now` does the same synchronously (a single node's start-up).
  :meth:`CoordinatorRuntime.schedule_unload` drops the shard: its timers are cancelled and its
  uncommitted writes fail with NOT_COORDINATOR. A resignation older than the election (its
  leader epoch below the one loaded) is ignored.
- **An event queue per shard** (:class:`~pydmq.coordinator.events.EventQueue`): writes, timer
  expiries, commit notifications and the unload run one at a time, so an operation never sees
  a half-applied change, without a lock.
- **Writes**: an operation returns a
  :class:`~pydmq.coordinator.api.CoordinatorResult`; the runtime appends its records
  (serialized by the coordinator's :class:`~pydmq.coordinator.api.CoordinatorSerde`) to the
  partition through the :class:`~pydmq.coordinator.api.CoordinatorLog` port and, once they are
  committed (the high watermark passed them), replays them into the shard (the code path of the
  load) and completes the operation's future with its response. Writes complete in the order
  they were appended; a write without records completes when the writes before it do. A write
  whose commit fails is never replayed: its future fails with the produce error. A commit that
  timed out (or lost replicas after the append) leaves its records in the log, where they may
  still commit: the shard is then reloaded from the log (failed over), so its state stays the
  replay of what the log holds.
- **Keyed writes** (``schedule_write(..., key=...)``): an operation that reads state its own
  records change (a consumer group) names that state; it runs only once every earlier write
  with the same key is committed and replayed (or failed), so it computes from the state those
  writes left, and a failed write leaves nothing behind for it to build on. Writes of other
  keys, and writes without a key (blind writes such as offset commits), are not held.
- **Bounded waits**: a write that has not run ``write_timeout_ms`` after it was scheduled
  (parked behind its key, or queued) fails with REQUEST_TIMED_OUT and never runs, as Kafka's
  runtime times its write events out; one that ran waits for its records' commit, which the
  log bounds (a commit that fails, times out or never reports fails it too). So every future
  of the runtime completes, and a request waiting on one is answered.
- **Transactional writes** (opt-in: the shard is a
  :class:`~pydmq.coordinator.api.TransactionalCoordinatorShard` and the log a
  :class:`~pydmq.coordinator.api.TransactionalCoordinatorLog`):
  :meth:`CoordinatorRuntime.schedule_transactional_write` appends an operation's records as a
  transactional batch of a producer id and epoch, replayed once committed through
  ``replay_transactional``; :meth:`CoordinatorRuntime.schedule_transaction_completion` appends
  the COMMIT/ABORT marker of a producer's transaction, replayed once committed through
  ``replay_end_transaction_marker`` (Kafka's scheduleTransactionalWriteOperation and
  scheduleTransactionCompletion). Both follow the rules of the other writes (queue, append
  order, commit, failure). Such a shard is loaded batch by batch
  (``replay_batches``), so a load replays the same calls as the live writes did.
- **Reads** (:meth:`CoordinatorRuntime.read`) run on the shard's state, which holds only
  committed records.
- **Timers per shard** (:class:`~pydmq.coordinator.timer.CoordinatorTimer`): an expired timer
  schedules its operation as a write of the shard; unloading cancels them.

Owned by the event loop: every method is called on it.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, NamedTuple, TypeVar, cast

from pydmq.coordinator.api import (
    CoordinatorError,
    CoordinatorLog,
    CoordinatorResult,
    CoordinatorSerde,
    CoordinatorShard,
    CoordinatorWriteError,
    TransactionalCoordinatorLog,
    TransactionalCoordinatorShard,
    TransactionResult,
)
from pydmq.coordinator.events import EventQueue
from pydmq.coordinator.timer import CoordinatorTimer
from pydmq.protocol.errors import ErrorCode

__all__ = ["DEFAULT_WRITE_TIMEOUT_MS", "CoordinatorRuntime", "ShardBuilder", "WriteOperation"]

log = logging.getLogger(__name__)

DEFAULT_WRITE_TIMEOUT_MS = 10_000
"""How long a write may wait to run (parked behind its key or queued) before it fails with
REQUEST_TIMED_OUT: twice the 5 s commit timeout of the coordinators' logs (Kafka's
``offsets.commit.timeout.ms``), so a write parked behind one whose commit is slow still runs."""

S = TypeVar("S", bound=CoordinatorShard[Any])
Rec = TypeVar("Rec")
R = TypeVar("R")

WriteOperation = Callable[[S], CoordinatorResult[Any, R]]
"""A write: reads the shard, returns the records to append and the response to give."""

ShardBuilder = Callable[[int, CoordinatorTimer[S]], S]
"""Builds the empty shard of a partition, given the partition and the shard's timer."""


class _ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class _Transaction(NamedTuple):
    """What makes a write transactional: its producer, and for a completion (an
    end-transaction marker) the transaction's result and the coordinator epoch."""

    producer_id: int
    producer_epoch: int
    result: TransactionResult | None = None  # None: records of the transaction
    coordinator_epoch: int = -1
    transaction_version: int = 0  # of a completion: its marker's (2: transactions v2)


class _PendingWrite:
    """A write appended but not yet replayed: its records, response, future, key and, for a
    transactional write, its transaction."""

    __slots__ = ("error", "future", "key", "records", "response", "txn")

    def __init__(
        self,
        records: Sequence[object],
        response: object,
        future: asyncio.Future[Any],
        key: Hashable | None,
        txn: _Transaction | None,
    ) -> None:
        self.records = records
        self.response = response
        self.future = future
        self.key = key
        self.txn = txn
        self.error: int | None = None  # None: not settled; NONE: committed; else why not


class _ParkedWrite:
    """A keyed write waiting for the earlier write of its key to be committed."""

    __slots__ = ("future", "operation", "txn")

    def __init__(
        self,
        operation: WriteOperation[Any, Any],
        future: asyncio.Future[Any],
        txn: _Transaction | None,
    ) -> None:
        self.operation = operation
        self.future = future
        self.txn = txn


def _no_records(shard: object) -> CoordinatorResult[Any, None]:
    """The operation of a transaction completion: the marker is its only write."""
    return CoordinatorResult((), None)


class _ShardContext(Generic[S]):
    """A partition led here: its shard, queue, timer and uncommitted writes (Kafka's
    CoordinatorContext)."""

    __slots__ = (
        "busy",
        "epoch",
        "load_task",
        "parked",
        "partition",
        "pending",
        "queue",
        "shard",
        "state",
        "timer",
        "transactional",
    )

    def __init__(self, partition: int, epoch: int, queue: EventQueue) -> None:
        self.partition = partition
        self.epoch = epoch
        self.queue = queue
        self.state = _ShardState.LOADING
        self.pending: deque[_PendingWrite] = deque()
        self.busy: dict[Hashable, _PendingWrite] = {}  # key -> its write not yet replayed
        self.parked: dict[Hashable, deque[_ParkedWrite]] = {}  # key -> writes waiting for it
        self.load_task: asyncio.Task[None] | None = None
        self.timer: CoordinatorTimer[S]
        self.shard: S
        self.transactional = False  # the shard and the log take part in transactions


class CoordinatorRuntime(Generic[S, Rec]):
    """Shards of the partitions of ``topic`` led here, whose records are ``Rec``; owned by the
    event loop (see the module docstring for load, queue, write, read and timer rules)."""

    def __init__(
        self,
        topic: str,
        partition_log: CoordinatorLog,
        serde: CoordinatorSerde[Rec],
        build_shard: ShardBuilder[S],
        *,
        load_yield_records: int = 1000,
        write_timeout_ms: int = DEFAULT_WRITE_TIMEOUT_MS,
    ) -> None:
        self.topic = topic
        self._log = partition_log
        self._serde = serde
        self._build_shard = build_shard
        self._load_yield_records = load_yield_records
        self._write_timeout_s = write_timeout_ms / 1000
        self._contexts: dict[int, _ShardContext[S]] = {}
        self._transactional_log = isinstance(partition_log, TransactionalCoordinatorLog)

    # -- ownership -------------------------------------------------------------------
    def schedule_load(self, partition: int, leader_epoch: int) -> asyncio.Task[None] | None:
        """This node leads ``partition`` at ``leader_epoch``: load its shard in the background
        (needs the running loop). Returns the load task, or None when the partition is led
        here already (a newer epoch is recorded, nothing is reloaded)."""
        if self._maybe_bump_epoch(partition, leader_epoch):
            return None
        context = self._new_context(partition, leader_epoch)
        log.info("loading %s-%d (leader epoch %d)", self.topic, partition, leader_epoch)
        task = asyncio.get_running_loop().create_task(self._load(context))
        context.load_task = task
        return task

    def load_now(self, partition: int, leader_epoch: int = 0) -> None:
        """Load ``partition``'s shard before returning (a node leading every partition, at
        start-up, or on its first use); nothing when it is loaded already."""
        if self._maybe_bump_epoch(partition, leader_epoch):
            return
        context = self._new_context(partition, leader_epoch)
        started = time.monotonic()
        count = 0
        try:
            for _ in self._replay_log(context):
                count += 1
        except Exception:
            self._load_failed(context)
            raise
        self._activate(context, count, started)

    def schedule_unload(self, partition: int, leader_epoch: int | None = None) -> None:
        """This node no longer leads ``partition`` (a follower at ``leader_epoch``, or the
        replica is gone: None): drop its shard."""
        context = self._contexts.get(partition)
        if context is None:
            return
        if leader_epoch is not None and 0 <= leader_epoch < context.epoch:
            log.info(
                "ignoring resignation of %s-%d at epoch %d (led at epoch %d)",
                self.topic,
                partition,
                leader_epoch,
                context.epoch,
            )
            return
        del self._contexts[partition]
        context.queue.schedule(functools.partial(self._close, context))

    def close(self) -> None:
        """Drop every shard (the node stops)."""
        contexts = list(self._contexts.values())
        self._contexts.clear()
        for context in contexts:
            context.queue.schedule(functools.partial(self._close, context))

    def status(self, partition: int) -> int:
        """NONE when ``partition`` is led here and loaded, COORDINATOR_LOAD_IN_PROGRESS while it
        loads, NOT_COORDINATOR when it is not led here."""
        context = self._contexts.get(partition)
        if context is None:
            return ErrorCode.NOT_COORDINATOR
        return _status(context)

    def partitions(self) -> dict[int, tuple[int, bool]]:
        """Partition -> (leader epoch, loading) of every partition led here."""
        return {p: (c.epoch, c.state is _ShardState.LOADING) for p, c in self._contexts.items()}

    def active_partitions(self) -> list[int]:
        return [p for p, c in self._contexts.items() if c.state is _ShardState.ACTIVE]

    @property
    def loading(self) -> bool:
        return any(c.state is _ShardState.LOADING for c in self._contexts.values())

    def pending_writes(self, partition: int) -> int:
        """How many writes of ``partition`` are appended but not yet committed and replayed."""
        context = self._contexts.get(partition)
        return 0 if context is None else len(context.pending)

    # -- operations ------------------------------------------------------------------
    def read(self, partition: int, operation: Callable[[S], R]) -> R:
        """Run ``operation`` on ``partition``'s committed state; raises
        :class:`CoordinatorError` when the shard does not serve."""
        context = self._contexts.get(partition)
        if context is None:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR)
        if context.state is not _ShardState.ACTIVE:
            raise CoordinatorError(_status(context))
        return operation(context.shard)

    def schedule_write(
        self, partition: int, operation: WriteOperation[S, R], *, key: Hashable | None = None
    ) -> asyncio.Future[R]:
        """Queue ``operation`` on ``partition``'s shard (needs the running loop). The future
        resolves with its response once its records are committed and replayed, or fails with
        :class:`CoordinatorError`. An idle shard runs it at once: a write the log commits at
        append time (a single node) is complete when this returns. With a ``key``, the
        operation runs only after the earlier writes with that key are committed and replayed
        (or failed), in the order they were scheduled."""
        context = self._contexts.get(partition)
        if context is None:
            return self._refused(ErrorCode.NOT_COORDINATOR)
        return self._write_to(context, operation, key)

    def schedule_transactional_write(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        operation: WriteOperation[S, R],
        *,
        key: Hashable | None = None,
    ) -> asyncio.Future[R]:
        """:meth:`schedule_write` whose records are appended as a transactional batch of
        ``producer_id`` at ``producer_epoch`` and replayed, once committed, through the
        shard's ``replay_transactional``. Fails with COORDINATOR_NOT_AVAILABLE (at once) when
        the shard or the log does not take part in transactions."""
        context = self._contexts.get(partition)
        if context is None:
            return self._refused(ErrorCode.NOT_COORDINATOR)
        return self._write_to(context, operation, key, _Transaction(producer_id, producer_epoch))

    def schedule_transaction_completion(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: TransactionResult,
        transaction_version: int = 0,
    ) -> asyncio.Future[None]:
        """Append the ``result`` marker of ``producer_id``'s transaction to ``partition``
        (after the writes queued before it) and, once committed, replay it through the
        shard's ``replay_end_transaction_marker``; the future resolves then, or fails with
        :class:`CoordinatorError` (the append's produce error, e.g. INVALID_PRODUCER_EPOCH,
        which a late marker of transactions v2, ``transaction_version`` 2, gets)."""
        context = self._contexts.get(partition)
        if context is None:
            return self._refused(ErrorCode.NOT_COORDINATOR)
        txn = _Transaction(
            producer_id, producer_epoch, result, coordinator_epoch, transaction_version
        )
        return self._write_to(context, _no_records, None, txn)

    # -- internals -------------------------------------------------------------------
    @staticmethod
    def _refused(error_code: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_exception(CoordinatorError(error_code))
        return future

    def _maybe_bump_epoch(self, partition: int, leader_epoch: int) -> bool:
        context = self._contexts.get(partition)
        if context is None:
            return False
        if leader_epoch > context.epoch:
            context.epoch = leader_epoch  # still the leader: nothing to reload
        return True

    def _new_context(self, partition: int, leader_epoch: int) -> _ShardContext[S]:
        name = f"{self.topic}-{partition}"
        context: _ShardContext[S] = _ShardContext(partition, leader_epoch, EventQueue(name))
        context.timer = CoordinatorTimer(name, lambda op, key: self._write_to(context, op, key))
        context.shard = self._build_shard(partition, context.timer)
        context.transactional = self._transactional_log and isinstance(
            context.shard, TransactionalCoordinatorShard
        )
        self._contexts[partition] = context
        return context

    def _write_to(
        self,
        context: _ShardContext[S],
        operation: WriteOperation[S, R],
        key: Hashable | None,
        txn: _Transaction | None = None,
    ) -> asyncio.Future[R]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        context.queue.schedule(lambda: self._run_write(context, operation, future, key, txn))
        if not future.done():
            expiry = loop.call_later(self._write_timeout_s, self._expire, context, future)
            future.add_done_callback(lambda _: expiry.cancel())
        return future

    def _expire(self, context: _ShardContext[S], future: asyncio.Future[Any]) -> None:
        """``write_timeout_ms`` passed since ``future``'s write was scheduled: fail it unless
        it ran (its records are appended: their commit, which the log bounds, settles it)."""
        if future.done() or any(write.future is future for write in context.pending):
            return
        future.set_exception(
            CoordinatorError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the write did not run within {self._write_timeout_s * 1000:.0f} ms",
            )
        )

    async def _load(self, context: _ShardContext[S], *, after_commit: bool = False) -> None:
        """Replay the partition into ``context``'s shard, yielding to the loop; with
        ``after_commit``, once everything the log holds is committed."""
        started = time.monotonic()
        count = 0
        try:
            committed = self._log.await_committed(context.partition) if after_commit else None
            if committed is not None and await committed:
                log.warning("%s-%d: not reloaded: leadership moved", self.topic, context.partition)
                self._load_failed(context)
                return
            if self._contexts.get(context.partition) is not context:
                return  # unloaded meanwhile
            for _ in self._replay_log(context):
                count += 1
                if count % self._load_yield_records == 0:
                    await asyncio.sleep(0)
                    if self._contexts.get(context.partition) is not context:
                        return  # unloaded meanwhile
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", self.topic, context.partition)
            self._load_failed(context)
            return
        if self._contexts.get(context.partition) is context:
            self._activate(context, count, started)

    def _replay_log(self, context: _ShardContext[S]) -> Iterator[None]:
        """Replay the partition's records into ``context``'s shard, one step per record (a
        marker is one): batch by batch for a transactional shard over a transactional log,
        else record by record through ``replay``."""
        shard = context.shard
        deserialize = self._serde.deserialize
        if not context.transactional:
            for stored in self._log.replay_partition(context.partition):
                record = deserialize(stored.key, stored.value)
                if record is not None:
                    shard.replay(record)
                yield None
            return
        txn_shard = cast(TransactionalCoordinatorShard[Any], shard)
        log_ = cast(TransactionalCoordinatorLog, self._log)
        for batch in log_.replay_batches(context.partition):
            if batch.end_txn is not None:
                txn_shard.replay_end_transaction_marker(
                    batch.producer_id, batch.producer_epoch, batch.end_txn
                )
                yield None
                continue
            for stored in batch.records:
                record = deserialize(stored.key, stored.value)
                if record is not None and batch.is_transactional:
                    txn_shard.replay_transactional(record, batch.producer_id, batch.producer_epoch)
                elif record is not None:
                    shard.replay(record)
                yield None

    def _load_failed(self, context: _ShardContext[S]) -> None:
        if self._contexts.get(context.partition) is context:
            del self._contexts[context.partition]  # its keys answer NOT_COORDINATOR
        context.state = _ShardState.CLOSED

    def _activate(self, context: _ShardContext[S], records: int, started: float) -> None:
        context.state = _ShardState.ACTIVE
        context.load_task = None
        log.log(
            logging.INFO if records else logging.DEBUG,
            "loaded %s-%d in %.0f ms: %d records",
            self.topic,
            context.partition,
            (time.monotonic() - started) * 1000,
            records,
        )
        context.queue.schedule(context.shard.on_loaded)

    def _close(self, context: _ShardContext[S]) -> None:
        was_active = context.state is _ShardState.ACTIVE
        context.state = _ShardState.CLOSED
        if context.load_task is not None and not context.load_task.done():
            context.load_task.cancel()
        context.load_task = None
        context.timer.cancel_all()
        if was_active:
            context.shard.on_unloaded()
        futures = [write.future for write in context.pending]
        futures += [write.future for parked in context.parked.values() for write in parked]
        context.pending.clear()
        context.busy.clear()
        context.parked.clear()
        for future in futures:
            if not future.done():
                future.set_exception(CoordinatorError(ErrorCode.NOT_COORDINATOR))

    def _run_write(
        self,
        context: _ShardContext[S],
        operation: WriteOperation[S, R],
        future: asyncio.Future[R],
        key: Hashable | None,
        txn: _Transaction | None,
    ) -> None:
        if future.done():
            return
        if key is not None and (key in context.busy or key in context.parked):
            context.parked.setdefault(key, deque()).append(_ParkedWrite(operation, future, txn))
            return
        self._execute(context, operation, future, key, txn)

    def _drain(self, context: _ShardContext[S], key: Hashable) -> None:
        """Run the writes parked on ``key`` until one of them holds it again (nothing when
        an earlier drain ran them all: one that completed at once scheduled this one)."""
        parked = context.parked.get(key)
        if parked is None:
            return
        while parked and key not in context.busy and context.state is _ShardState.ACTIVE:
            write = parked.popleft()
            self._execute(context, write.operation, write.future, key, write.txn)
        if not parked and context.parked.get(key) is parked:
            del context.parked[key]

    def _execute(
        self,
        context: _ShardContext[S],
        operation: WriteOperation[S, R],
        future: asyncio.Future[R],
        key: Hashable | None,
        txn: _Transaction | None,
    ) -> None:
        if future.done():
            return
        if context.state is not _ShardState.ACTIVE:
            future.set_exception(CoordinatorError(_status(context)))
            return
        if txn is not None and not context.transactional:
            log.error("%s-%d does not take part in transactions", self.topic, context.partition)
            future.set_exception(CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        try:
            result = operation(context.shard)
        except CoordinatorError as exc:
            future.set_exception(exc)
            return
        except Exception:
            log.exception("an operation on %s-%d failed", self.topic, context.partition)
            future.set_exception(CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        committed: asyncio.Future[int] | None = None
        if result.records or (txn is not None and txn.result is not None):
            try:
                committed = self._append(context.partition, result.records, txn)
            except CoordinatorWriteError as exc:
                future.set_exception(CoordinatorError(exc.error_code, str(exc)))
                return
            except Exception:
                log.exception("appending to %s-%d failed", self.topic, context.partition)
                future.set_exception(CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
                return
        write = _PendingWrite(result.records, result.response, future, key, txn)
        context.pending.append(write)
        if key is not None:
            context.busy[key] = write
        if committed is None:
            write.error = ErrorCode.NONE
            self._complete(context)
            return

        def settled(done: asyncio.Future[int]) -> None:
            context.queue.schedule(lambda: self._settle(context, write, done))

        committed.add_done_callback(settled)

    def _append(
        self, partition: int, records: Sequence[Rec], txn: _Transaction | None
    ) -> asyncio.Future[int] | None:
        """Append a write's records (or its marker) to ``partition``; see
        :meth:`CoordinatorLog.append`."""
        if txn is None:
            return self._log.append(partition, [self._serde.serialize(r) for r in records])
        log_ = cast(TransactionalCoordinatorLog, self._log)  # checked by _execute
        if txn.result is not None:
            return log_.append_end_txn_marker(
                partition,
                txn.producer_id,
                txn.producer_epoch,
                txn.coordinator_epoch,
                txn.result,
                txn.transaction_version,
            )
        stored = [self._serde.serialize(r) for r in records]
        return log_.append_transactional(partition, stored, txn.producer_id, txn.producer_epoch)

    def _settle(
        self, context: _ShardContext[S], write: _PendingWrite, committed: asyncio.Future[int]
    ) -> None:
        if context.state is not _ShardState.ACTIVE or write.error is not None:
            return  # unloaded meanwhile: the write failed with NOT_COORDINATOR
        if committed.cancelled() or committed.exception() is not None:
            write.error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            write.error = committed.result()
        self._complete(context)
        if write.error in _IN_DOUBT:
            self._fail_over(context, write.error)

    def _fail_over(self, context: _ShardContext[S], error: int) -> None:
        """A write's commit failed after its records were appended (``error``): they stay
        in the leader's log and commit once the high watermark passes them, unknown to the
        shard. So the shard is failed over: dropped (its pending writes fail with
        NOT_COORDINATOR) and loaded again once everything in the log is committed, so its
        state is again the replay of the committed log, and shows nothing uncommitted.
        Meanwhile the partition answers COORDINATOR_LOAD_IN_PROGRESS; if leadership moves
        first, the load fails (the resignation that follows finds the partition gone)."""
        partition = context.partition
        if self._contexts.get(partition) is not context:
            return
        log.warning(
            "%s-%d: a write failed after its append (error %d): reloading the partition",
            self.topic,
            partition,
            error,
        )
        del self._contexts[partition]
        context.queue.schedule(functools.partial(self._close, context))
        reloaded = self._new_context(partition, context.epoch)
        loop = asyncio.get_running_loop()
        reloaded.load_task = loop.create_task(self._load(reloaded, after_commit=True))

    def _complete(self, context: _ShardContext[S]) -> None:
        """Replay and answer the settled writes at the head of the queue, in append order."""
        while context.pending and context.pending[0].error is not None:
            write = context.pending.popleft()
            if write.error:
                if not write.future.done():
                    write.future.set_exception(CoordinatorError(write.error))
            else:
                try:
                    self._replay_write(context.shard, write)
                except Exception:
                    log.exception(
                        "replaying a write of %s-%d failed", self.topic, context.partition
                    )
                if not write.future.done():
                    write.future.set_result(write.response)
            key = write.key
            if key is not None and context.busy.get(key) is write:
                del context.busy[key]
                if key in context.parked:
                    context.queue.schedule(functools.partial(self._drain, context, key))

    @staticmethod
    def _replay_write(shard: S, write: _PendingWrite) -> None:
        """Apply a committed write to ``shard``, as a load replays it from the log."""
        txn = write.txn
        if txn is None:
            for record in write.records:
                shard.replay(record)
            return
        txn_shard = cast(TransactionalCoordinatorShard[Any], shard)  # checked by _execute
        if txn.result is not None:
            txn_shard.replay_end_transaction_marker(txn.producer_id, txn.producer_epoch, txn.result)
            return
        for record in write.records:
            txn_shard.replay_transactional(record, txn.producer_id, txn.producer_epoch)


_IN_DOUBT = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})
"""Errors of a commit that leave the write's records in the leader's log: they commit once the
high watermark passes them, unless leadership moves (then the partition is unloaded)."""


def _status(context: _ShardContext[Any]) -> int:
    match context.state:
        case _ShardState.ACTIVE:
            return ErrorCode.NONE
        case _ShardState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        case _ShardState.CLOSED:
            return ErrorCode.NOT_COORDINATOR
