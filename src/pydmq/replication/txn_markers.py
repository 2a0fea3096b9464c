"""Appending transaction markers to the partitions led here: the partition side of
WriteTxnMarkers (Kafka's ``ReplicaManager.appendRecords`` with origin COORDINATOR and
``acks=-1``), with neutral entries and error codes.

Per entry, in order: a partition not hosted here is NOT_LEADER_OR_FOLLOWER when the cluster
knows it, else UNKNOWN_TOPIC_OR_PARTITION; one hosted but not led here is
NOT_LEADER_OR_FOLLOWER; a committed ISR below ``min.insync.replicas`` is NOT_ENOUGH_REPLICAS
(nothing appended); the producer state refuses a marker of an older producer epoch, or of
transactions v2 at the epoch of an open transaction (INVALID_PRODUCER_EPOCH: a late marker,
KIP-890), or an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED); a
storage failure is KAFKA_STORAGE_ERROR. Otherwise one control batch (COMMIT or ABORT, the
producer id and epoch, the coordinator epoch) is appended and the entry's answer waits, as an
``acks=-1`` produce, until the high watermark passed it (NOT_LEADER_OR_FOLLOWER on a
leadership change, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank meanwhile,
REQUEST_TIMED_OUT after ``timeout_ms``). In single-node mode nothing waits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydmq.protocol.errors import ErrorCode
from pydmq.replication.delayed_produce import PendingAck, await_acks, check_acks
from pydmq.storage.api import TopicPartition
from pydmq.storage.log import LogAppendError, LogStorageError

if TYPE_CHECKING:
    from pydmq.replication.replica_manager import ReplicaManager

__all__ = ["TxnMarkerEntry", "append_txn_markers"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TxnMarkerEntry:
    """One partition's marker of a WriteTxnMarkers request, and its answer (``error_code``,
    filled by :func:`append_txn_markers`)."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    # The coordinator's transactions version (WriteTxnMarkers v2): 2 fences late markers.
    transaction_version: int = 0
    error_code: int = ErrorCode.NONE

    def __call__(self, code: int) -> None:
        """The produce purgatory's report of the settled ``acks=-1`` wait."""
        self.error_code = code


def append_txn_markers(
    replica_manager: ReplicaManager, entries: list[TxnMarkerEntry], timeout_ms: int
) -> Awaitable[None] | None:
    """Append every entry's marker as leader and fill its ``error_code``; returns what
    completes once the ``acks=-1`` waits are settled, or None when nothing waits."""
    pending: list[PendingAck] = []
    for entry in entries:
        partition, error = replica_manager.leader_partition(entry.tp)
        if partition is None:
            entry.error_code = error
            continue
        try:
            info = partition.append_marker_to_leader(
                entry.producer_id,
                entry.producer_epoch,
                entry.coordinator_epoch,
                entry.commit,
                entry.transaction_version,
            )
        except LogAppendError as exc:
            if isinstance(exc, LogStorageError) and exc.offline:
                replica_manager.log_dir_failed(exc.log_dir, exc.message)
            log.info(
                "%s marker of producer %d epoch %d to %s refused with %s: %s",
                "COMMIT" if entry.commit else "ABORT",
                entry.producer_id,
                entry.producer_epoch,
                entry.tp,
                ErrorCode(exc.error_code).name,
                exc.message,
            )
            entry.error_code = exc.error_code
            continue
        replica_manager.fetch_purgatory.notify(entry.tp)
        ack = PendingAck(partition, info.last_offset + 1, entry)
        if not check_acks(ack):
            pending.append(ack)
    if pending:
        return await_acks(replica_manager.produce_purgatory, pending, timeout_ms)
    return None
