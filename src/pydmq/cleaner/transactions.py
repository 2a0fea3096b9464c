"""What the cleaner may drop of a compacted log's transactions, as it walks the batches in
offset order (Kafka's ``CleanedTransactionMetadata``), sans-IO.

Built from the log's aborted transactions overlapping the cleaned range (taken on the log's
owner when the cleaning is planned); the range never reaches an open transaction (it stops at
the first unstable offset). Rules, as Kafka's cleaner:

* a transactional batch whose producer has an aborted transaction started at or before it,
  not yet ended by its ABORT marker, is aborted: its records are neither mapped nor kept (the
  batch is then "observed" for that transaction);
* any other transactional batch is committed data, mapped and cleaned as any (its producer's
  transaction is then "observed" until its COMMIT marker);
* a marker whose transaction had no batch observed in this pass (its records are gone) may be
  removed (:attr:`MarkerVerdict.removable`) once its delete horizon has passed; for an ABORT
  its index entry goes at once (:attr:`MarkerVerdict.drop_index_entry`), so an entry never
  outlives its marker (a read_committed consumer given an entry without its marker would skip
  the producer's later transactions).

One instance per pass (the mapping pass, the cleaning pass), owned by the cleaner thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from pydmq.protocol.records import BatchHeader, ControlRecordType, EndTxnMarker
from pydmq.storage.api import AbortedTxn

__all__ = ["CleanedTransactions", "MarkerVerdict"]


class MarkerVerdict(NamedTuple):
    """What may happen to one marker: removed (after its delete horizon), and whether its
    aborted-transaction index entry goes now."""

    removable: bool
    drop_index_entry: bool


_KEEP = MarkerVerdict(False, False)


class CleanedTransactions:
    """Tells aborted transactional batches from committed ones and judges markers."""

    __slots__ = ("_aborted", "_committed", "_pending")

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        # producer id -> whether a batch of its aborted transaction was observed
        self._aborted: dict[int, bool] = {}
        self._committed: set[int] = set()  # producer ids with committed batches observed

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            self._aborted.setdefault(pending.popleft().producer_id, False)

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether the data batch ``header`` (the next in offset order) holds aborted records."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        producer_id = header.producer_id
        if producer_id in self._aborted:
            self._aborted[producer_id] = True
            return True
        self._committed.add(producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> MarkerVerdict:
        """The control batch ``header`` (the next in offset order), holding ``marker`` (None:
        another control record, or none: an empty control batch, removable)."""
        self._start_up_to(header.last_offset)
        producer_id = header.producer_id
        if marker is None:
            return MarkerVerdict(header.records_count == 0, False)
        if marker.control_type == ControlRecordType.ABORT:
            observed = self._aborted.pop(producer_id, False)
            self._committed.discard(producer_id)
            return _KEEP if observed else MarkerVerdict(True, True)
        if marker.control_type == ControlRecordType.COMMIT:
            if producer_id in self._committed:
                self._committed.discard(producer_id)
                return _KEEP
            return MarkerVerdict(True, False)
        return _KEEP
