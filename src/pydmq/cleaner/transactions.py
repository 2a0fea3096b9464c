"""Which batches of a compacted log belong to aborted transactions, as the cleaner walks them
in offset order (Kafka's ``CleanedTransactionMetadata``), sans-IO.

Built from the log's aborted transactions overlapping the cleaned range (taken on the log's
owner when the cleaning is planned); the range never reaches an open transaction (it stops at
the first unstable offset). A transactional batch whose producer has an aborted transaction
started at or before it, and not yet ended by its ABORT marker, is aborted: its records are
neither mapped nor kept. Other transactional batches are committed data, mapped and cleaned as
any. An ABORT marker ends its producer's aborted transaction. Markers themselves are always
kept (see :func:`pydmq.cleaner.cleaning.BatchCleaner`).

One instance per pass (the mapping pass, the cleaning pass), owned by the cleaner thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from pydmq.protocol.records import BatchHeader
from pydmq.storage.api import AbortedTxn

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    """Tells aborted transactional batches from committed ones, batch after batch."""

    __slots__ = ("_ongoing", "_pending")

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._ongoing: set[int] = set()  # producer ids inside an aborted transaction

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            self._ongoing.add(pending.popleft().producer_id)

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether the batch ``header`` (the next in offset order) holds aborted records; an
        ABORT or COMMIT marker ends its producer's transaction (False: markers are kept)."""
        self._start_up_to(header.last_offset)
        if header.is_control:
            self._ongoing.discard(header.producer_id)
            return False
        return header.is_transactional and header.producer_id in self._ongoing
