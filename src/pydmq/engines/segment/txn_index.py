"""TransactionIndex: the aborted transactions of one segment log, in ``aborted-txns.txnindex``.

One file per log (not one per segment as Kafka's ``.txnindex``): an entry belongs to the
segment holding its ABORT marker, and since markers are never moved by compaction the entries
of deleted segments are exactly those whose marker lies below the first segment left. Entries
are Kafka's layout, 34 bytes each, big-endian: version int16 (0), producer id int64, first
offset int64, last offset int64 (the marker), last stable offset int64.

An append writes one entry and fdatasyncs the file (the file's creation also fsyncs the
directory): aborts are rare, and an entry must be durable once the port's
``append_aborted_txn`` returns. Dropping entries (truncation, deleted segments, the log cleaner's,
entries past the log end found at open, a torn last entry left by a crash) rewrites the file
atomically.
Owned by its :class:`~pydmq.engines.segment.log.SegmentLog` (the broker's event loop).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Collection
from typing import Final

from pydmq.storage.api import AbortedTxn, overlapping_aborted_txns
from pydmq.storage.checkpoint import fsync_dir, read_checkpoint_file, write_atomically
from pydmq.storage.errors import fdatasync

__all__ = ["TXN_INDEX_FILE", "TransactionIndex"]

TXN_INDEX_FILE: Final = "aborted-txns.txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION: Final = 0


class TransactionIndex:
    """The aborted-transaction entries of one log, in marker order, mirrored in its file."""

    __slots__ = ("_entries", "_last_offsets", "path")

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, TXN_INDEX_FILE)
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # the entries' marker offsets, for bisect

    def load(self, first_offset: int, log_end_offset: int) -> None:
        """Read the file (the log directory exists); keep entries whose marker lies in
        ``[first_offset, log_end_offset)`` (the first segment's base, the recovered log end),
        and rewrite the file if anything was dropped (a torn last entry included)."""
        data = read_checkpoint_file(self.path)
        if data is None:
            return
        entries: list[AbortedTxn] = []
        whole = len(data) - len(data) % _ENTRY.size
        for position in range(0, whole, _ENTRY.size):
            version, producer_id, first, last, stable = _ENTRY.unpack_from(data, position)
            if version != _VERSION or first > last:
                break  # not ours to interpret: the entries after it are not trusted either
            if first_offset <= last < log_end_offset:
                entries.append(AbortedTxn(producer_id, first, last, stable))
        self._set(entries)
        if len(entries) * _ENTRY.size != len(data):
            self._rewrite()

    def _set(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        self._last_offsets = [txn.last_offset for txn in entries]

    def append(self, txn: AbortedTxn) -> None:
        """Add ``txn`` (its marker is the log's last batch) and make it durable."""
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            os.write(
                fd,
                _ENTRY.pack(
                    _VERSION,
                    txn.producer_id,
                    txn.first_offset,
                    txn.last_offset,
                    txn.last_stable_offset,
                ),
            )
            fdatasync(fd, self.path, "txnindex.fsync")
        finally:
            os.close(fd)
        if created:
            fsync_dir(os.path.dirname(self.path))
        self._entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        # Entries whose marker is below start_offset cannot overlap: skip them by bisection.
        first = bisect.bisect_left(self._last_offsets, start_offset)
        return overlapping_aborted_txns(self._entries[first:], start_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        keep = bisect.bisect_left(self._last_offsets, offset)
        if keep < len(self._entries):
            self._set(self._entries[:keep])
            self._rewrite()

    def delete_below(self, offset: int) -> None:
        """Drop the entries whose marker is below ``offset`` (the first segment left)."""
        drop = bisect.bisect_left(self._last_offsets, offset)
        if drop:
            self._set(self._entries[drop:])
            self._rewrite()

    def remove(self, last_offsets: Collection[int]) -> None:
        """Drop the entries whose marker offsets are ``last_offsets``."""
        gone = set(last_offsets)
        kept = [txn for txn in self._entries if txn.last_offset not in gone]
        if len(kept) != len(self._entries):
            self._set(kept)
            self._rewrite()

    def clear(self) -> None:
        if self._entries or os.path.exists(self.path):
            self._set([])
            self._rewrite()

    def _rewrite(self) -> None:
        if not self._entries:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                return
            fsync_dir(os.path.dirname(self.path))
            return
        write_atomically(
            self.path,
            b"".join(
                _ENTRY.pack(
                    _VERSION, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset
                )
                for t in self._entries
            ),
        )
