"""What a write of the transaction coordinator answers, and the fence of a zombie producer:
shared by the requests' writes (:mod:`pydmq.transactions.coordinator`) and the timers'
(:mod:`pydmq.transactions.timeouts`). Sans-IO values."""

from __future__ import annotations

from dataclasses import dataclass

from pydmq.coordinator.api import CoordinatorResult
from pydmq.transactions.api import ProducerIdAndEpoch
from pydmq.transactions.metadata import NO_PRODUCER_EPOCH, TransactionMetadata, TransactionState
from pydmq.transactions.records import TransactionRecord

__all__ = ["WriteOutcome", "fence", "no_write"]

_MAX_EPOCH = 32767


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What a write answers, and the Prepare metadata whose markers to send once it is
    committed (None when it wrote none)."""

    answer: ProducerIdAndEpoch
    prepared: TransactionMetadata | None = None


def no_write(code: int) -> CoordinatorResult[TransactionRecord, WriteOutcome]:
    """A write that appends nothing and answers ``code``."""
    return CoordinatorResult((), WriteOutcome(ProducerIdAndEpoch.error(code)))


def fence(md: TransactionMetadata, now: int) -> TransactionMetadata:
    """Kafka's PrepareEpochFence then PrepareAbort, as one record: the Ongoing transaction of
    ``md`` aborts at epoch + 1, so the markers fence its producer (a zombie) on every
    partition. An epoch at its maximum is not bumped."""
    epoch = md.producer_epoch if md.producer_epoch >= _MAX_EPOCH else md.producer_epoch + 1
    return md.transition_to(
        TransactionState.PREPARE_ABORT,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
        last_update_timestamp=now,
    )
