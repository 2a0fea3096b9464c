"""SharedDurability: the durability work all logs of one data directory share.

Two things are shared by every :class:`~pydmq.engines.segment.log.SegmentLog` of a data dir, and
doing them once per log made opening, flushing and closing hundreds of logs slow:

* **The data directory's entries.** A partition directory's entry in the data dir must be
  durable before anything inside it is promised durable, or a power loss may drop the whole
  directory with its fsynced files. One fsync of the data dir makes every entry it holds
  durable, so this counts the partition directories created (the ones found at start count as
  one creation, as they may come from an open that crashed before its fsync) and fsyncs the data
  dir only when a log about to promise something has an entry newer than the last fsync: once
  for all logs opened at start, once per burst of new partitions.
* **The LMDB index.** Index entries wait in memory (``index.flush.ms``); a flush writes those of
  every log in one transaction and syncs the environment only if something was written since
  its last sync, so closing N logs syncs it once, not N times.

Owned by the engine; used from the broker's event loop only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.engines.segment.index import LogIndex, SegmentMeta
from pydmq.storage.checkpoint import fsync_dir

if TYPE_CHECKING:
    from pydmq.engines.segment.log import SegmentLog

__all__ = ["SharedDurability"]


class SharedDurability:
    """Data-dir entry fsyncs and index writes/syncs shared by the logs of one data dir."""

    def __init__(self, data_dir: str, index: LogIndex) -> None:
        self.data_dir = data_dir
        self.index = index
        self._dirs_created = 1  # the directories found at start: not known durable yet
        self._dirs_synced = 0
        self._index_pending: dict[SegmentLog, None] = {}  # insertion-ordered set
        # Partitions with index entries when the engine started: a new log of one of them
        # (its directory gone, its entries not: a crash in between) must drop them first.
        self.indexed_at_start = index.indexed_logs()

    # -- partition directory entries ---------------------------------------------------------

    @property
    def dir_generation(self) -> int:
        """The generation a log opened now must wait for (see :meth:`make_entries_durable`)."""
        return self._dirs_created

    def directory_created(self) -> int:
        """Count a new partition directory; returns the generation that covers its entry."""
        self._dirs_created += 1
        return self._dirs_created

    def make_entries_durable(self, generation: int) -> None:
        """fsync the data dir unless a previous fsync already covered ``generation``."""
        if self._dirs_synced >= generation:
            return
        created = self._dirs_created
        fsync_dir(self.data_dir)
        self._dirs_synced = created

    # -- index ------------------------------------------------------------------------------

    def index_pending(self, log: SegmentLog) -> None:
        """``log`` has index entries (or segment metadata) waiting in memory."""
        self._index_pending[log] = None

    def write_index(self) -> None:
        """Write the waiting index entries of every log in one LMDB transaction."""
        if not self._index_pending:
            return
        offsets: list[tuple[bytes, int]] = []
        times: list[tuple[bytes, int, int]] = []
        metas: list[tuple[bytes, SegmentMeta]] = []
        for log in self._index_pending:
            log.take_index(offsets, times, metas)
        self._index_pending.clear()
        if metas:
            self.index.put(offsets, times, metas)

    def sync_index(self) -> None:
        """Write every waiting index entry, then make the environment durable (if it changed)."""
        self.write_index()
        self.index.sync()

    def forget(self, log: SegmentLog) -> None:
        self._index_pending.pop(log, None)
