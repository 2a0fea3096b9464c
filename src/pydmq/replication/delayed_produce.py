"""Delayed produce: acks=-1 responses wait until every ISR member has the records.

A produce with ``acks=-1`` is appended at once; its response waits in the produce purgatory
until, for every partition of the request, the leader's high watermark passed the last
appended offset (``Partition.acks_all_satisfied``), or the partition can no longer satisfy it
(leadership lost: NOT_LEADER_OR_FOLLOWER; ISR shrunk below min.insync.replicas after the
append: NOT_ENOUGH_REPLICAS_AFTER_APPEND), or the request's ``timeout_ms`` passes
(REQUEST_TIMED_OUT, Kafka's DelayedProduce expiry). Waiters are woken by
``ReplicaManager.notify_high_watermark``: a follower fetch that moved the high watermark, an
ISR change, a leadership change. A waking only re-checks, so spurious wake-ups are harmless.

In single-node mode the high watermark follows every append, so nothing ever waits here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.protocol.errors import ErrorCode
from pydmq.replication.purgatory import DelayedOperationPurgatory, wait_until_settled

if TYPE_CHECKING:
    from pydmq.replication.partition import Partition

__all__ = ["PendingAck", "await_acks", "check_acks"]


@dataclass(slots=True)
class PendingAck:
    """One partition of a parked produce: the offset its ISR must reach and where to report."""

    partition: Partition
    required_offset: int  # last appended offset + 1
    report: Callable[[int], None]  # error code of the partition response (NONE when acked)
    done: bool = False


def check_acks(pending: PendingAck) -> bool:
    """Settle ``pending`` if it can be; True when it is settled."""
    if pending.done:
        return True
    satisfied, error = pending.partition.acks_all_satisfied(pending.required_offset)
    if satisfied or error != ErrorCode.NONE:
        pending.report(error)
        pending.done = True
    return pending.done


async def await_acks(
    purgatory: DelayedOperationPurgatory, pending: Sequence[PendingAck], timeout_ms: int
) -> None:
    """Wait until every entry is settled or ``timeout_ms`` passed (REQUEST_TIMED_OUT)."""
    await wait_until_settled(
        purgatory, lambda: [p.partition.tp for p in pending if not check_acks(p)], timeout_ms
    )
    for p in pending:
        if not check_acks(p):
            p.report(ErrorCode.REQUEST_TIMED_OUT)
            p.done = True
