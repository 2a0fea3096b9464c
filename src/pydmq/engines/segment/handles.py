"""FileHandleCache: the file descriptors the segments of one engine hold, bounded by a budget.

Kafka keeps every segment file of every partition open, so a node's open files grow with its
partitions until ``open()`` fails with EMFILE (measured on pydmq before this cache: at about
4,000 partitions of one CreateTopics, and at every restart after it). Here a segment opens its
file on first use and the cache closes the least recently used ones once the engine holds more
than ``budget`` descriptors, a share of ``RLIMIT_NOFILE`` (:func:`open_files_budget`) that
leaves the rest to connections, the LMDB environment and sockets.

A segment counts one descriptor for its file and one for an mmap of it (CPython's ``mmap``
keeps a duplicate of the descriptor it maps until it is closed). Closing a segment's handles
(:meth:`HandleHolder.close_handles`) fdatasyncs first when it was written since its last sync,
so no pending fsync obligation is dropped; mmap views already handed out stay valid (the
mapping outlives its descriptors; its duplicate goes when the last view is released, so those
few in-flight descriptors are not counted). Every use of a segment's file moves it to the
most recently used end, which keeps the active segment of a partition being written open.

Owned by the engine; used from the broker's event loop only.
"""

from __future__ import annotations

import logging
import resource
from collections import OrderedDict
from typing import Protocol

__all__ = [
    "DEFAULT_OPEN_FILES_SHARE",
    "MIN_BUDGET",
    "FileHandleCache",
    "HandleHolder",
    "open_files_budget",
]

log = logging.getLogger(__name__)

DEFAULT_OPEN_FILES_SHARE = 0.5
"""Half of the soft limit for segment files; the other half for connections, LMDB, sockets."""
MIN_BUDGET = 16
"""The smallest budget accepted: a few segments must be able to be open at once."""
_UNLIMITED_AS = 1 << 20  # what an unlimited RLIMIT_NOFILE counts as


class HandleHolder(Protocol):
    """Something that holds descriptors the cache may ask it to close (a LogSegment)."""

    def close_handles(self) -> None:
        """fdatasync if written since the last sync, then close the file and drop the mmap."""
        ...


def open_files_budget(share: float) -> int:
    """``share`` of this process's soft ``RLIMIT_NOFILE``, at least :data:`MIN_BUDGET`."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = _UNLIMITED_AS if soft == resource.RLIM_INFINITY else soft
    return max(MIN_BUDGET, int(limit * share))


class FileHandleCache:
    """An LRU of segments holding descriptors; closes the oldest beyond ``budget``."""

    __slots__ = ("_held", "_open", "budget", "evictions")

    def __init__(self, budget: int) -> None:
        if budget < MIN_BUDGET:
            raise ValueError(f"open files budget must be at least {MIN_BUDGET}, got {budget}")
        self.budget = budget
        self._held: OrderedDict[HandleHolder, int] = OrderedDict()  # holder -> descriptors
        self._open = 0
        self.evictions = 0

    @property
    def open_count(self) -> int:
        """Descriptors held by the segments of this engine (views in flight excluded)."""
        return self._open

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, holder: object) -> bool:
        return holder in self._held

    def touch(self, holder: HandleHolder) -> None:
        """``holder`` (which holds descriptors) was used: it becomes the most recent."""
        self._held.move_to_end(holder)

    def opened(self, holder: HandleHolder, count: int = 1) -> None:
        """``holder`` opened ``count`` more descriptors; close others beyond the budget."""
        held = self._held
        held[holder] = held.pop(holder, 0) + count
        self._open += count
        if self._open > self.budget:
            self._evict(holder)

    def closed(self, holder: HandleHolder, count: int | None = None) -> None:
        """``holder`` closed ``count`` of its descriptors itself (all of them by default)."""
        held = self._held
        had = held.get(holder)
        if had is None:
            return
        gone = had if count is None or count >= had else count
        self._open -= gone
        if gone == had:
            del held[holder]
        else:
            held[holder] = had - gone

    def _evict(self, keep: HandleHolder) -> None:
        held = self._held
        failures = 0
        while self._open > self.budget and len(held) > 1:
            victim = next(iter(held))
            if victim is keep:  # only when ``keep`` is not the most recent: skip over it
                held.move_to_end(keep)
                continue
            count = held.pop(victim)
            try:
                victim.close_handles()
            except OSError:
                # The sync before close failed: keep the file open (and its obligation: the
                # owning log's next flush reports it) and close others instead.
                log.exception("closing an idle segment file failed; it stays open")
                held[victim] = count
                failures += 1
                if failures >= len(held):
                    return
                continue
            self._open -= count
            self.evictions += 1
