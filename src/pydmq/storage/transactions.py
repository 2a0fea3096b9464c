"""The transactional side of one partition log: markers, the last stable offset and the
aborted-transaction index (KIP-98), engine-agnostic, above the storage port.

A COMMIT or ABORT marker (a control batch written by WriteTxnMarkers on the leader, copied by
followers, replayed at open) completes its producer's transaction in the producer state. An
ABORT also records an :class:`~pydmq.storage.api.AbortedTxn` through the engine's
``append_aborted_txn``: the producer's first offset of the transaction (the marker's own offset
when the transaction wrote nothing here), the marker's offset, and the last stable offset once
the marker is written (the first offset of another open transaction, else the marker's offset
+ 1: Kafka's ProducerStateManager.lastStableOffset(completedTxn)).

The last stable offset (LSO) is min(the first offset of every open transaction, the first
offset of every completed transaction whose marker the high watermark has not passed yet, the
high watermark): a transaction becomes readable to read_committed consumers only once its
marker is replicated, as Kafka's ``unreplicatedTxns``. With no transaction open or waiting it
is the high watermark, at the cost of two empty-container checks (it is on the fetch path).

Replaying at open (the batches after the producer snapshot) records again the ABORT entries
the engine lacks: the index is rebuilt from the log where it is behind, as Kafka's recovery
does. Owned by its :class:`~pydmq.storage.log.UnifiedLog` (the broker's event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from pydmq.producers.state import ProducerStateManager
from pydmq.protocol.records import (
    BatchHeader,
    ControlRecordType,
    CorruptRecordError,
    EndTxnMarker,
    decode_records,
    parse_end_txn_marker,
)
from pydmq.storage.api import AbortedTxn, PartitionLog

__all__ = ["TransactionTracker", "end_txn_marker"]


def end_txn_marker(buf: bytes | bytearray | memoryview, header: BatchHeader) -> EndTxnMarker | None:
    """The COMMIT/ABORT marker of the control batch at ``header.position`` in ``buf`` (None
    for another control record type or a batch that does not hold one)."""
    try:
        records = decode_records(buf, header, max_decompressed=1 << 20)
        return parse_end_txn_marker(records[0]) if records else None
    except CorruptRecordError:
        return None


class TransactionTracker:
    """Applies markers to a log's producer state and engine index; answers the LSO."""

    __slots__ = ("_engine_log", "_unreplicated")

    def __init__(self, engine_log: PartitionLog) -> None:
        self._engine_log = engine_log
        # (first offset, marker offset) of completed transactions the high watermark has not
        # passed: still unstable.
        self._unreplicated: list[tuple[int, int]] = []

    def reset(self) -> None:
        """Forget the completed transactions (the producer state was rebuilt)."""
        self._unreplicated.clear()

    def last_stable_offset(
        self, state: ProducerStateManager, high_watermark: int, log_start_offset: int
    ) -> int:
        """The LSO; an unstable transaction that starts below the log start offset (its
        first records deleted) counts from the log start, as Kafka's firstUnstableOffset."""
        ongoing = state.ongoing_txns
        unreplicated = self._unreplicated
        if not ongoing and not unreplicated:
            return high_watermark
        first_unstable = high_watermark
        if unreplicated:
            unreplicated[:] = [t for t in unreplicated if t[1] >= high_watermark]
            for first, _ in unreplicated:
                first_unstable = min(first_unstable, first)
        for first in ongoing.values():
            first_unstable = min(first_unstable, first)
        return min(max(first_unstable, log_start_offset), high_watermark)

    def apply_marker(
        self,
        state: ProducerStateManager,
        header: BatchHeader,
        marker: EndTxnMarker,
        now_ms: int,
        *,
        replaying: bool = False,
    ) -> None:
        """Complete the transaction ``marker`` (appended as ``header``) ends: the producer
        state, the unstable transactions, and for an ABORT the engine's index (when
        ``replaying``, only if the engine lacks the entry)."""
        producer_id = header.producer_id
        marker_offset = header.base_offset
        txn_first = state.txn_first_offset(producer_id)
        first = marker_offset if txn_first is None else txn_first
        others = [o for pid, o in state.ongoing_txns.items() if pid != producer_id]
        stable = min(others) if others else marker_offset + 1
        timestamp = header.max_timestamp if header.max_timestamp >= 0 else now_ms
        state.complete_txn(
            producer_id,
            header.producer_epoch,
            marker.coordinator_epoch,
            marker_offset,
            timestamp,
            check=False,
        )
        if txn_first is not None:
            self._unreplicated.append((txn_first, marker_offset))
        if marker.control_type != ControlRecordType.ABORT:
            return
        engine_log = self._engine_log
        if replaying and any(
            txn.last_offset == marker_offset
            for txn in engine_log.collect_aborted_txns(marker_offset, marker_offset + 1)
        ):
            return
        engine_log.append_aborted_txn(AbortedTxn(producer_id, first, marker_offset, stable))

    def replay(
        self,
        state: ProducerStateManager,
        headers: Iterable[BatchHeader],
        read_batch: Callable[[int], bytes],
    ) -> None:
        """Replay batch headers in offset order (open, truncation), skipping those the state
        already covers; markers are read with ``read_batch(base_offset)``."""
        for header in headers:
            if header.base_offset < state.map_end_offset:
                continue
            if header.is_control and header.producer_id >= 0:
                buf = read_batch(header.base_offset)
                marker = end_txn_marker(buf, _at_start(header))
                if marker is not None:
                    self.apply_marker(state, header, marker, header.max_timestamp, replaying=True)
                    continue
            state.update(header, header.base_offset, header.last_offset, header.max_timestamp)


def _at_start(header: BatchHeader) -> BatchHeader:
    """``header`` for its batch's bytes read alone (position 0)."""
    return replace(header, position=0)
