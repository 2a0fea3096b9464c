"""Delayed DeleteRecords: the answer waits until the replicas have the new log start offset.

The leader raises its own log start offset at once; the response for the partition waits in
the delete-records purgatory until the partition's low watermark (``Partition.low_watermark``:
the smallest log start offset over the leader and its followers) reached the requested offset,
and then reports that low watermark, as Kafka's DelayedDeleteRecords does. Otherwise a leader
that crashed right after answering could be succeeded by a follower that still has the deleted
records. Followers learn the new log start from their next fetch response (a parked replica
fetch completes when the log start moved) and report it in the fetch after that.

Settled early with NOT_LEADER_OR_FOLLOWER when this broker stops leading the partition (or no
longer hosts this replica of it); REQUEST_TIMED_OUT after the request's ``timeout_ms``, with
the low watermark known when the request arrived (Kafka keeps that one too). Waiters are woken
by follower fetches, ISR and leadership changes (``ReplicaManager.notify_high_watermark``) and
changes of the alive brokers. A waking only re-checks, so spurious wake-ups are harmless.

On one node (or replication factor 1) the low watermark is the leader's log start offset, so
nothing ever waits here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.protocol.errors import ErrorCode
from pydmq.replication.purgatory import DelayedOperationPurgatory, wait_until_settled
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:
    from pydmq.replication.partition import Partition

__all__ = ["DeleteRecordsResult", "PendingDelete", "await_deletes", "check_delete"]


@dataclass(slots=True)
class DeleteRecordsResult:
    """One partition's DeleteRecords answer: its error and low watermark (-1 on error)."""

    error_code: int = ErrorCode.NONE
    low_watermark: int = -1


@dataclass(slots=True)
class PendingDelete:
    """One partition of a parked DeleteRecords: the offset its replicas' log starts must reach,
    and the result to settle."""

    partition: Partition
    required_offset: int
    low_watermark: int  # when the request arrived: answered with REQUEST_TIMED_OUT
    result: DeleteRecordsResult
    done: bool = False

    def settle(self, error_code: int, low_watermark: int) -> None:
        self.result.error_code = error_code
        self.result.low_watermark = low_watermark
        self.done = True


def check_delete(
    pending: PendingDelete,
    hosted: Callable[[TopicPartition], Partition | None],
    is_alive: Callable[[int], bool] | None = None,
) -> bool:
    """Settle ``pending`` if it can be; True when it is settled.

    ``hosted`` is the replica manager's lookup: a partition it no longer returns (stopped,
    deleted, re-created) is not led here any more.
    """
    if pending.done:
        return True
    partition = pending.partition
    done: bool
    error: int
    low: int
    if hosted(partition.tp) is not partition:
        done, error, low = True, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    else:
        done, error, low = partition.delete_records_satisfied(pending.required_offset, is_alive)
    if done:
        pending.settle(error, low)
    return pending.done


async def await_deletes(
    purgatory: DelayedOperationPurgatory,
    pending: Sequence[PendingDelete],
    timeout_ms: int,
    hosted: Callable[[TopicPartition], Partition | None],
    is_alive: Callable[[int], bool] | None = None,
) -> None:
    """Wait until every entry is settled or ``timeout_ms`` passed (REQUEST_TIMED_OUT)."""
    await wait_until_settled(
        purgatory,
        lambda: [p.partition.tp for p in pending if not check_delete(p, hosted, is_alive)],
        timeout_ms,
    )
    for p in pending:
        if not check_delete(p, hosted, is_alive):
            p.settle(ErrorCode.REQUEST_TIMED_OUT, p.low_watermark)
