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

* **The data directory's health.** A write that fails with anything but a full disk, or any
  failed fsync, takes the whole data dir offline (:meth:`storage_error`): every later write,
  flush and checkpoint of its logs raises :class:`~pydmq.storage.errors.KafkaStorageError`
  until the broker restarts, and nothing more is promised durable. Reads keep working.

Owned by the engine; used from the broker's event loop only (the checkpoint writer thread
only reads :attr:`offline`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydmq.engines.segment.index import IndexWriteError, LogIndex, SegmentMeta
from pydmq.storage.checkpoint import fsync_dir
from pydmq.storage.errors import KafkaStorageError, is_transient

if TYPE_CHECKING:
    from pydmq.engines.segment.log import SegmentLog
    from pydmq.engines.segment.segment import LogSegment

__all__ = ["IndexBatch", "SharedDurability"]

log = logging.getLogger(__name__)


class IndexBatch:
    """Index entries collected from segments for one LMDB put; the segments forget them only
    once the put committed (:meth:`written`), so a failed put loses nothing."""

    __slots__ = ("metas", "offsets", "taken", "times")

    def __init__(self) -> None:
        self.offsets: list[tuple[bytes, int]] = []
        self.times: list[tuple[bytes, int, int]] = []
        self.metas: list[tuple[bytes, SegmentMeta]] = []
        self.taken: list[tuple[LogSegment, int, int]] = []

    def add(self, segment: LogSegment) -> None:
        offsets, times = segment.pending_index()
        self.offsets += offsets
        self.times += times
        self.metas.append((segment.prefix, segment.meta))
        self.taken.append((segment, len(offsets), len(times)))

    def written(self) -> None:
        for segment, offsets, times in self.taken:
            segment.index_written(offsets, times)


class SharedDurability:
    """Data-dir entry fsyncs, index writes/syncs and the offline state shared by the logs of
    one data dir."""

    def __init__(self, data_dir: str, index: LogIndex) -> None:
        self.data_dir = data_dir
        self.index = index
        self._dirs_created = 1  # the directories found at start: not known durable yet
        self._dirs_synced = 0
        self._index_pending: dict[SegmentLog, None] = {}  # insertion-ordered set
        self._index_failing = False  # the last index put failed (logged once per episode)
        self.offline: KafkaStorageError | None = None  # the failure that took the dir offline
        # Partitions with index entries when the engine started: a new log of one of them
        # (its directory gone, its entries not: a crash in between) must drop them first.
        self.indexed_at_start = index.indexed_logs()

    # -- failures ---------------------------------------------------------------------------

    def storage_error(self, what: str, exc: BaseException) -> KafkaStorageError:
        """The error to raise for a failed ``what``; takes the dir offline unless the failure
        is transient (a full disk, with the failed write undone)."""
        offline = not is_transient(exc)
        error = KafkaStorageError(
            f"{what} in {self.data_dir} failed: {exc}", self.data_dir, offline=offline
        )
        if offline and self.offline is None:
            self.offline = error
            log.error(
                "log dir %s is offline until restart: %s failed: %s", self.data_dir, what, exc
            )
        return error

    def check_online(self) -> None:
        """Raise :class:`KafkaStorageError` if the data dir is offline."""
        if self.offline is not None:
            raise KafkaStorageError(
                f"log dir {self.data_dir} is offline: {self.offline.message}",
                self.data_dir,
                offline=True,
            )

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
        self.check_online()
        created = self._dirs_created
        try:
            fsync_dir(self.data_dir)
        except OSError as exc:
            raise self.storage_error("fsync of the data dir", exc) from exc
        self._dirs_synced = created

    # -- index ------------------------------------------------------------------------------

    def index_pending(self, log: SegmentLog) -> None:
        """``log`` has index entries (or segment metadata) waiting in memory."""
        self._index_pending[log] = None

    def write_index(self, logs: Iterable[SegmentLog] | None = None) -> bool:
        """Write the waiting index entries of ``logs`` (default: every log) in one LMDB
        transaction. A failed write keeps them waiting, to be retried; returns whether they
        were written. An index failure never fails an append: the segments are the truth."""
        pending = self._index_pending
        chosen = list(pending) if logs is None else [x for x in logs if x in pending]
        if not chosen:
            return True
        batch = IndexBatch()
        for segment_log in chosen:
            segment_log.collect_index(batch)
        if batch.metas:
            try:
                self.index.put(batch.offsets, batch.times, batch.metas)
            except IndexWriteError as exc:
                if not self._index_failing:
                    self._index_failing = True
                    log.error("index entries kept in memory and retried: %s", exc)
                return False
            if self._index_failing:
                self._index_failing = False
                log.info("index writes to %s succeed again", self.index.path)
        batch.written()
        for segment_log in chosen:
            segment_log.index_written()
            del pending[segment_log]
        return True

    def sync_index(self) -> None:
        """Write every waiting index entry, then make the environment durable (if it changed).

        Raises :class:`KafkaStorageError` when the sync fails (the dir goes offline)."""
        self.write_index()
        try:
            self.index.sync()
        except OSError as exc:
            raise self.storage_error("sync of the index", exc) from exc

    def forget(self, log: SegmentLog) -> None:
        self._index_pending.pop(log, None)
