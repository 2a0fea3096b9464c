"""Fetching from the partitions led here: Kafka's ``ReplicaManager.fetchMessages`` and
``DelayedFetch``, with neutral parameters and results.

The caller (the Fetch handler) resolves topic names or ids and applies its fetch session; what
it hands over is :class:`FetchParams` (who fetches, how long to wait, how much) and one
:class:`FetchTarget` per partition; what it gets back is one :class:`FetchPartitionResult` per
target, in the targets' order, at once or after the long poll.

Per partition, in order: a partition not hosted here is NOT_LEADER_OR_FOLLOWER when the
cluster knows it, else UNKNOWN_TOPIC_OR_PARTITION; a refused follower claim is
NOT_LEADER_OR_FOLLOWER (below); then the high watermark, last stable offset and log start
offset are reported; a
``current_leader_epoch`` other than ours is FENCED_LEADER_EPOCH (older) or
UNKNOWN_LEADER_EPOCH (newer); a partition not led here is NOT_LEADER_OR_FOLLOWER. Reads return
whole batches up to the high watermark (a follower's up to the log end offset; a
``read_committed`` consumer's up to the last stable offset, with the aborted transactions
overlapping the range from the first returned batch's base offset to the last stable offset,
as Kafka's ``collectAbortedTransactions``, whose upper bound may also pass the returned
batches), the first
partition with data at least one whole batch even above the byte limits (KIP-74). A read that
meets damaged stored data answers CORRUPT_MESSAGE for the partition (the intact batches before
the damage are served first): see :mod:`pydmq.replication.corruption`.

Followers: a fetch with ``replica_id >= 0`` claims to come from a follower. Nothing
authenticates it, so the claim is believed only when the request came over the inter-broker
listener at a version carrying the replica's broker epoch (the caller's part,
:attr:`FetchParams.inter_broker`), this is a cluster-mode broker, the replica is another broker
and the epoch equals that broker's registration epoch in the cluster metadata, and, per
partition, when the replica is a current follower of a partition led here. Otherwise the
partition is NOT_LEADER_OR_FOLLOWER with no records and no follower state changes. A believed
follower's first read records its fetch offset and log start offset
(``Partition.update_follower_fetch_state``): a high watermark that moved wakes parked acks=-1
produces, long polls and DeleteRecords; otherwise DeleteRecords waiting for the followers' log
starts re-check; a follower outside the ISR that reached the high watermark asks for an ISR
expansion. A parked follower fetch completes when the log start offset of a partition it reads
moved (a DeleteRecords on the leader), so the follower learns it without waiting out
``max_wait``.

Long poll: when fewer than ``min_bytes`` are ready (and no partition erred), the fetch parks on
the fetch purgatory, woken by appends and high watermark or log start moves of a partition it
reads, and reads again, until ``min_bytes`` or ``max_wait_ms``. A fetch of more targets than
one slice (:data:`pydmq.api.slices.SLICE_ELEMENTS`) reads in slices between which the loop
serves other connections, each read of its long poll too; a normal fetch reads at once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.api.slices import SLICE_ELEMENTS, run_sliced
from pydmq.protocol.errors import ErrorCode
from pydmq.replication.corruption import corrupt_read_error
from pydmq.replication.purgatory import wait_for_notification
from pydmq.storage.api import (
    AbortedTxn,
    FetchDataInfo,
    OffsetOutOfRangeError,
    StorageCorruptionError,
    TopicPartition,
)

if TYPE_CHECKING:
    from pydmq.replication.partition import Partition
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = ["DelayedFetch", "FetchParams", "FetchPartitionResult", "FetchTarget", "fetch_messages"]

_NO_LIMIT = 2**31 - 1


@dataclass(slots=True)
class FetchParams:
    """Who fetches and how, from one Fetch request (Kafka's FetchParams)."""

    replica_id: int  # >= 0: claims to be that broker's follower; -1: a consumer
    replica_epoch: int  # the claimed follower's broker epoch (-1: not sent)
    # The request came over the inter-broker listener at a version carrying the replica epoch
    # (Fetch v15+): the only way a follower claim may be believed.
    inter_broker: bool
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # the response's byte limit (<= 0: none)
    check_leader_epoch: bool  # the request carries ``current_leader_epoch`` (Fetch v9+)
    read_committed: bool = False  # isolation_level=1: up to the last stable offset


@dataclass(slots=True)
class FetchTarget:
    """One partition to read: where, how much, and the epoch the fetcher believes current."""

    topic_id: uuid.UUID
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    log_start_offset: int = -1  # a follower's own log start offset (-1: not sent)
    # An error the caller found resolving the target (UNKNOWN_TOPIC_ID): answered as it is.
    error: int = ErrorCode.NONE


@dataclass(slots=True)
class FetchPartitionResult:
    """What one target's read gave (Kafka's FetchPartitionData); -1 where unknown."""

    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FetchDataInfo | None = None  # None: no records
    # read_committed: the aborted transactions overlapping ``records`` (None otherwise)
    aborted_transactions: list[AbortedTxn] | None = None


# What one read gives: each target's result (the targets' order), the bytes read, any error.
_Read = tuple[list[FetchPartitionResult], int, bool]


def fetch_messages(
    replica_manager: ReplicaManager, params: FetchParams, targets: list[FetchTarget]
) -> list[FetchPartitionResult] | Awaitable[list[FetchPartitionResult]]:
    """Read ``targets`` now, or return what completes the long poll (see the module)."""
    fetch = DelayedFetch(replica_manager, params, targets)
    if fetch.large:
        return fetch.complete_sliced()
    results, total, has_error = fetch.read()
    if total >= params.min_bytes or params.max_wait_ms <= 0 or has_error or not targets:
        return results
    # Watched now, in the step of the read that found too little: an append or a moved last
    # stable offset between this read and the long poll's first wait (a later loop step)
    # still wakes it.
    return fetch.long_poll(replica_manager.fetch_purgatory.watch(fetch.watched))


class DelayedFetch:
    """One Fetch request's reads, again after each long-poll wake-up (Kafka's DelayedFetch).

    Owned by the event loop, by the request's handling (its task while it long-polls).
    """

    __slots__ = (
        "_follower_refused",
        "_follower_state_recorded",
        "_log_starts",
        "_replica_manager",
        "large",
        "log_start_moved",
        "params",
        "targets",
    )

    def __init__(
        self, replica_manager: ReplicaManager, params: FetchParams, targets: list[FetchTarget]
    ) -> None:
        self._replica_manager = replica_manager
        self.params = params
        self.targets = targets
        # A claimed follower that fails the identity checks gets no partition at all.
        self._follower_refused = params.replica_id >= 0 and not replica_manager.is_known_follower(
            params.replica_id, params.replica_epoch, params.inter_broker
        )
        self._follower_state_recorded = False
        # Log start offset of each target at the first read (follower fetches only); a later
        # read that finds one moved completes the long poll.
        self._log_starts: list[int] | None = None
        self.log_start_moved = False
        # More targets than one slice of work: read in slices, so that other connections
        # are served in between.
        self.large = len(targets) > SLICE_ELEMENTS

    def read(self) -> _Read:
        """Read every target now."""
        steps = self.read_steps()
        while True:
            try:
                next(steps)
            except StopIteration as done:
                result: _Read = done.value
                return result

    async def read_sliced(self) -> _Read:
        """Read every target, giving the loop back between slices (a fetch of 100,000
        partitions held it ~1.5 s)."""
        return await run_sliced(self.read_steps())

    async def complete_sliced(self) -> list[FetchPartitionResult]:
        """A fetch of more targets than one slice: read in slices, then long-poll if needed."""
        params = self.params
        results, total, has_error = await self.read_sliced()
        if total >= params.min_bytes or params.max_wait_ms <= 0 or has_error:
            return results
        return await self.long_poll()

    @property
    def watched(self) -> list[TopicPartition]:
        """The partitions whose notifications wake the long poll."""
        return [t.tp for t in self.targets if t.tp.topic]

    async def long_poll(
        self, watching: asyncio.Future[None] | None = None
    ) -> list[FetchPartitionResult]:
        """Park until ``min_bytes`` are ready, a read errs, a follower's log start moved, or
        ``max_wait_ms`` passed; then the last read's results. ``watching``: the watch taken
        when the read that found too little was done (its first wait)."""
        params = self.params
        purgatory = self._replica_manager.fetch_purgatory
        deadline = time.monotonic() + params.max_wait_ms / 1000.0
        watched = self.watched
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            woken = await wait_for_notification(purgatory, watched, remaining, watching)
            watching = None
            if not woken:
                break
            results, total, has_error = await self.read_sliced() if self.large else self.read()
            if total >= params.min_bytes or has_error or self.log_start_moved:
                return results
        results, _, _ = await self.read_sliced() if self.large else self.read()
        return results

    def read_steps(self) -> Generator[int, None, _Read]:
        """The read, one step per target (yields 1); returns (results, bytes, has_error)."""
        replica_manager = self._replica_manager
        params = self.params
        remaining = params.max_bytes if params.max_bytes > 0 else _NO_LIMIT
        total = 0
        has_error = False
        results: list[FetchPartitionResult] = []
        follower = params.replica_id >= 0
        record_follower = follower and not self._follower_state_recorded
        self._follower_state_recorded = True
        now_ms = int(time.time() * 1000) if record_follower else 0
        log_starts: list[int] = []
        check_epoch = params.check_leader_epoch
        read_committed = params.read_committed and not follower
        for target in self.targets:
            yield 1
            result = FetchPartitionResult()
            results.append(result)
            log_starts.append(-1)
            if target.error:
                result.error_code = target.error
                has_error = True
                continue
            tp = target.tp
            partition = replica_manager.get(tp)
            if partition is None:
                result.error_code = replica_manager.unknown_partition_error(tp)
                has_error = True
                continue
            if follower and (
                self._follower_refused or not partition.is_follower_replica(params.replica_id)
            ):
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                has_error = True
                continue
            log = partition.log
            result.high_watermark = log.high_watermark
            result.last_stable_offset = log.last_stable_offset
            result.log_start_offset = log_starts[-1] = log.log_start_offset
            epoch = target.current_leader_epoch
            if check_epoch and epoch >= 0 and epoch != partition.leader_epoch:
                result.error_code = (
                    ErrorCode.FENCED_LEADER_EPOCH
                    if epoch < partition.leader_epoch
                    else ErrorCode.UNKNOWN_LEADER_EPOCH
                )
                has_error = True
                continue
            if not partition.is_leader:
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                has_error = True
                continue
            if record_follower:
                self._record_follower_fetch(partition, target, now_ms)
            try:
                info = partition.read(
                    target.fetch_offset,
                    min(target.partition_max_bytes, remaining),
                    min_one_batch=total == 0,
                    to_high_watermark=not follower,
                    read_committed=read_committed,
                )
            except OffsetOutOfRangeError:
                result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                has_error = True
                continue
            except StorageCorruptionError as exc:
                result.error_code = corrupt_read_error(tp, exc)
                has_error = True
                continue
            if info.size:
                result.records = info
                total += info.size
                remaining = max(0, remaining - info.size)
                if read_committed:
                    result.aborted_transactions = log.collect_aborted_txns(
                        info.first_offset, result.last_stable_offset
                    )
        if follower:
            if self._log_starts is None:
                self._log_starts = log_starts
            elif log_starts != self._log_starts:
                self.log_start_moved = True
        return results, total, has_error

    def _record_follower_fetch(
        self, partition: Partition, target: FetchTarget, now_ms: int
    ) -> None:
        """A follower fetching at ``target.fetch_offset`` holds everything before it, and
        nothing below ``target.log_start_offset``."""
        replica_manager = self._replica_manager
        params = self.params
        if partition.update_follower_fetch_state(
            params.replica_id,
            target.fetch_offset,
            now_ms,
            params.replica_epoch,
            log_start_offset=target.log_start_offset,
        ):
            replica_manager.notify_high_watermark(partition.tp)
        else:
            # A DeleteRecords may wait for this follower's log start (a no-op without one).
            replica_manager.delete_records_purgatory.notify(partition.tp)
        if (
            params.replica_id not in partition.isr
            and target.fetch_offset >= partition.high_watermark
        ):
            replica_manager.isr_expansion_wanted()
