"""SegmentStorageEngine: the default engine, segment files plus one LMDB index per data dir.

Owned by the broker; used from its event loop.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Mapping

from pydmq.engines.segment.handles import (
    DEFAULT_OPEN_FILES_SHARE,
    FileHandleCache,
    open_files_budget,
)
from pydmq.engines.segment.index import LogIndex
from pydmq.engines.segment.log import SegmentLog
from pydmq.engines.segment.prescan import (
    CLEAN_SHUTDOWN_MARKER,
    RecoveryPrescan,
    last_segment_files,
)
from pydmq.engines.segment.shared import SharedDurability
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.checkpoint import make_dirs_durably
from pydmq.storage.errors import KafkaStorageError

__all__ = ["INDEX_DIR_NAME", "SegmentStorageEngine"]

INDEX_DIR_NAME = ".index.lmdb"
_LOG_DIR = re.compile(r"^(.+)-(\d+)$")
_READ_MODES = ("pread", "mmap")

_MARKER_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


class SegmentStorageEngine:
    """Creates, opens and deletes :class:`SegmentLog` directories under ``data_dir``.

    Options (all strings): ``index.map.size`` (initial LMDB map size, bytes; grows on demand),
    ``index.flush.ms`` (how long sparse index entries may stay in memory, default 500),
    ``active.segment.read`` (``pread``, the default, or ``mmap``), ``open.files.max`` (how many
    descriptors the segments may hold open, see :mod:`~pydmq.engines.segment.handles`) or else
    ``open.files.share`` (that budget as a share of the soft ``RLIMIT_NOFILE``, default 0.5).

    A partition directory is created by its log's first write, not by :meth:`open_log`.

    After an unclean shutdown (no clean-shutdown marker in ``data_dir``), the first
    :meth:`open_log` starts a :class:`~pydmq.engines.segment.prescan.RecoveryPrescan` of every
    partition's last segment on ``recovery.threads`` threads (default 2, Kafka's
    ``num.recovery.threads.per.data.dir`` default); a clean :meth:`close` writes the marker.
    """

    def __init__(self, data_dir: str, options: Mapping[str, str] | None = None) -> None:
        options = options or {}
        self.data_dir = os.path.abspath(data_dir)
        make_dirs_durably(self.data_dir)
        self._read_mode = options.get("active.segment.read", "pread")
        if self._read_mode not in _READ_MODES:
            raise ValueError(f"active.segment.read must be one of {_READ_MODES}")
        self._index_flush_ms = int(options.get("index.flush.ms", "500"))
        self.index = LogIndex(
            os.path.join(self.data_dir, INDEX_DIR_NAME),
            int(options.get("index.map.size", str(1 << 30))),
        )
        self._shared = SharedDurability(self.data_dir, self.index)
        budget = options.get("open.files.max")
        share = float(options.get("open.files.share", str(DEFAULT_OPEN_FILES_SHARE)))
        self.handles = FileHandleCache(
            int(budget) if budget is not None else open_files_budget(share)
        )
        self._logs: dict[TopicPartition, SegmentLog] = {}
        self._recovery_threads = int(options.get("recovery.threads", "2"))
        marker = os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER)
        self._clean_start = os.path.exists(marker)
        if self._clean_start:
            with contextlib.suppress(OSError):
                os.unlink(marker)  # from now on a crash is unclean
        self._prescan: RecoveryPrescan | None = None
        self._prescan_decided = False

    @property
    def offline(self) -> KafkaStorageError | None:
        """The failure that took the data dir offline (None while it is online)."""
        return self._shared.offline

    def _log_dir(self, tp: TopicPartition) -> str:
        return os.path.join(self.data_dir, f"{tp.topic}-{tp.partition}")

    def open_log(self, tp: TopicPartition, config: LogConfig) -> SegmentLog:
        log = self._logs.get(tp)
        if log is not None and not log.closed:
            return log
        if not self._prescan_decided:
            self._prescan_decided = True
            if not self._clean_start and self._recovery_threads > 0:
                files = last_segment_files([self._log_dir(t) for t in self.list_logs()])
                if files:
                    self._prescan = RecoveryPrescan(files, self._recovery_threads)
        log = SegmentLog(
            tp,
            self._log_dir(tp),
            config,
            self._shared,
            self.handles,
            read_mode=self._read_mode,
            index_flush_ms=self._index_flush_ms,
            prescan=self._prescan,
        )
        self._logs[tp] = log
        return log

    def delete_log(self, tp: TopicPartition) -> None:
        log = self._logs.pop(tp, None)
        if log is not None and not log.closed:
            self._shared.forget(log)
            for segment in log.segments:
                segment.close(sync=False)  # the files go with the directory
        if log is not None and not log.has_directory:
            return  # never written: nothing on disk, no index entry (removing 10,000 is free)
        shutil.rmtree(self._log_dir(tp), ignore_errors=True)
        self.index.delete_log(tp)

    def list_logs(self) -> list[TopicPartition]:
        found = []
        for name in os.listdir(self.data_dir):
            m = _LOG_DIR.match(name)
            if m and os.path.isdir(os.path.join(self.data_dir, name)):
                found.append(TopicPartition(m.group(1), int(m.group(2))))
        return sorted(found)

    def close(self) -> None:
        if self._prescan is not None:
            self._prescan.close()
        try:
            for log in self._logs.values():
                log.close()
        finally:
            self._logs.clear()
            # An offline dir promises nothing more: its index is closed without a sync.
            self.index.close(sync=self._shared.offline is None)
        if self._shared.offline is None:
            # Every log closed and synced: the next start needs no recovery prescan.
            with contextlib.suppress(OSError):
                os.close(os.open(os.path.join(self.data_dir, CLEAN_SHUTDOWN_MARKER), _MARKER_FLAGS))

    def recovery_prescans_used(self) -> int:
        """How many recovery scans were taken from the prescan (tests, benchmarks)."""
        return 0 if self._prescan is None else self._prescan.used
