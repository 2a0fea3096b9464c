"""The transaction coordinator's timers of one shard (Kafka's TransactionCoordinator
``abortTimedOutTransactions`` and TransactionStateManager ``removeExpiredTransactionalIds``).

Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the shard's Ongoing
transactions older than their timeout are fenced and aborted: one PrepareAbort record at epoch
+ 1 each (the fence of :func:`~pydmq.transactions.outcome.fence`), whose markers then go out as
any Prepare's. Every ``transaction.remove.expired.transaction.cleanup.interval.ms`` the ids in
Empty, CompleteCommit or CompleteAbort whose last update is ``transactional.id.expiration.ms``
old get a tombstone. Each is a write keyed by the transactional id that checks again, when it
runs, that the id still qualifies. Timers of the shard, so they die with it; event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pydmq.coordinator.api import CoordinatorResult
from pydmq.coordinator.runtime import CoordinatorRuntime
from pydmq.protocol.errors import ErrorCode
from pydmq.transactions.api import ProducerIdAndEpoch, TransactionConfig
from pydmq.transactions.metadata import TransactionMetadata
from pydmq.transactions.outcome import WriteOutcome, fence, no_write
from pydmq.transactions.records import TransactionRecord
from pydmq.transactions.shard import TransactionCoordinatorShard

__all__ = ["TransactionTimeouts"]

log = logging.getLogger(__name__)

_ABORT_TIMER = "abort-timed-out-transactions"
_EXPIRE_TIMER = "remove-expired-transactional-ids"

Runtime = CoordinatorRuntime[TransactionCoordinatorShard, TransactionRecord]
AfterWrite = Callable[[int, "asyncio.Future[WriteOutcome]"], None]


class TransactionTimeouts:
    """The abort and expiry timers of the coordinator's shards; event loop."""

    def __init__(
        self,
        config: TransactionConfig,
        runtime: Runtime,
        clock: Callable[[], int],
        after_write: AfterWrite,
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._clock = clock
        self._after_write = after_write

    def start(self, shard: TransactionCoordinatorShard) -> None:
        """Start both timers of ``shard`` (a loaded shard of a serving node)."""
        self._schedule_abort(shard)
        self._schedule_expiry(shard)

    def _schedule_abort(self, shard: TransactionCoordinatorShard) -> None:
        shard.timer.schedule(
            _ABORT_TIMER, self._config.abort_timed_out_interval_ms, self._abort_timed_out
        )

    def _schedule_expiry(self, shard: TransactionCoordinatorShard) -> None:
        shard.timer.schedule(
            _EXPIRE_TIMER, self._config.remove_expired_interval_ms, self._remove_expired
        )

    def _abort_timed_out(
        self, shard: TransactionCoordinatorShard
    ) -> CoordinatorResult[TransactionRecord, None]:
        """Fence and abort every Ongoing transaction past its timeout (one keyed write
        each), then run again after the interval."""
        now = self._clock()
        for md in list(shard):
            if md.is_timed_out(now):
                log.info(
                    "%s: aborting the transaction of producer %d (epoch %d): timed out",
                    md.transactional_id,
                    md.producer_id,
                    md.producer_epoch,
                )
                self._abort_one(shard.partition, md.transactional_id)
        self._schedule_abort(shard)
        return CoordinatorResult((), None)

    def _abort_one(self, partition: int, transactional_id: str) -> None:
        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
            now = self._clock()
            md = shard.get(transactional_id)
            if md is None or not md.is_timed_out(now):
                return no_write(ErrorCode.NONE)
            fenced = fence(md, now)
            outcome = WriteOutcome(ProducerIdAndEpoch(ErrorCode.NONE), fenced)
            return CoordinatorResult([TransactionRecord(transactional_id, fenced)], outcome)

        write = self._runtime.schedule_write(partition, operation, key=transactional_id)
        write.add_done_callback(lambda done: self._after_write(partition, done))

    def _remove_expired(
        self, shard: TransactionCoordinatorShard
    ) -> CoordinatorResult[TransactionRecord, None]:
        """Tombstones of the ids idle for ``transactional.id.expiration.ms``."""
        now = self._clock()
        for md in list(shard):
            if self._expired(md, now):
                self._expire_one(shard.partition, md.transactional_id)
        self._schedule_expiry(shard)
        return CoordinatorResult((), None)

    def _expired(self, md: TransactionMetadata, now: int) -> bool:
        return (
            md.state.is_complete_or_empty
            and md.last_update_timestamp + self._config.id_expiration_ms <= now
        )

    def _expire_one(self, partition: int, transactional_id: str) -> None:
        def operation(
            shard: TransactionCoordinatorShard,
        ) -> CoordinatorResult[TransactionRecord, None]:
            md = shard.get(transactional_id)
            if md is None or not self._expired(md, self._clock()):
                return CoordinatorResult((), None)
            log.info("%s: expired (idle since %d)", transactional_id, md.last_update_timestamp)
            return CoordinatorResult([TransactionRecord(transactional_id, None)], None)

        write = self._runtime.schedule_write(partition, operation, key=transactional_id)
        write.add_done_callback(_report)


def _report(write: asyncio.Future[Any]) -> None:
    if not write.cancelled() and write.exception() is not None:
        log.info("an expiry write failed: %s", write.exception())
