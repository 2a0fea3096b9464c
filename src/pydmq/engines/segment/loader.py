"""LogLoader: opens a partition directory, recovers its unflushed tail and repairs indexes.

Segments are the truth. A segment wholly below the recovery point whose LMDB metadata matches
its file size is trusted as is; every other segment is scanned batch by batch (framing and
CRC32C), a torn or corrupt tail is truncated away (with every later segment), and its index
entries are rebuilt. A segment that ends below the next one's base offset, at or past the
recovery point, ends the log too (a power loss took its unsynced tail but kept a later file).
Used once per log open, on the broker's event loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pydmq.engines.segment.handles import FileHandleCache
from pydmq.engines.segment.index import LogIndex, segment_prefix
from pydmq.engines.segment.segment import LogSegment
from pydmq.engines.segment.segments import LogSegments
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.checkpoint import read_offset_checkpoint

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "LoadedLog",
    "LogLoader",
]

RECOVERY_POINT_CHECKPOINT = "_recovery-point.checkpoint"
LOG_START_OFFSET_CHECKPOINT = "_log-start-offset.checkpoint"
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_STRAY_SUFFIXES = (".tmp", ".truncating")


@dataclass(slots=True)
class LoadedLog:
    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    recovered_segments: int
    truncated_bytes: int


class LogLoader:
    """Builds the :class:`LogSegments` of one partition directory, recovering as needed."""

    def __init__(
        self,
        log_dir: str,
        tp: TopicPartition,
        config: LogConfig,
        index: LogIndex,
        read_mode: str,
        handles: FileHandleCache,
    ) -> None:
        self._dir = log_dir
        self._tp = tp
        self._config = config
        self._index = index
        self._read_mode = read_mode
        self._handles = handles

    def _segment(self, base_offset: int, meta: object = None) -> LogSegment:
        from pydmq.engines.segment.index import SegmentMeta

        return LogSegment(
            self._dir,
            self._tp,
            base_offset,
            self._index,
            self._config.index_interval_bytes,
            self._handles,
            read_mode=self._read_mode,
            meta=meta if isinstance(meta, SegmentMeta) else None,
        )

    def load(self) -> LoadedLog:
        # The directory exists (the engine created it). Its entry in the data dir may not be
        # durable yet: the log makes it so before it promises anything (SharedDurability).
        bases: list[int] = []
        for name in os.listdir(self._dir):
            if name.endswith(_STRAY_SUFFIXES):
                os.unlink(os.path.join(self._dir, name))
                continue
            m = _SEGMENT_FILE.match(name)
            if m:
                bases.append(int(m.group(1)))
        bases.sort()
        checkpointed_start = read_offset_checkpoint(
            os.path.join(self._dir, LOG_START_OFFSET_CHECKPOINT)
        )
        recovery_point = (
            read_offset_checkpoint(os.path.join(self._dir, RECOVERY_POINT_CHECKPOINT)) or 0
        )

        metas = self._index.segment_metas(self._tp)
        for stale in set(metas) - set(bases):
            self._index.delete_segment(segment_prefix(self._tp, stale))

        segments = LogSegments()
        recovered = 0
        truncated_bytes = 0
        for i, base in enumerate(bases):
            if len(segments) and recovery_point <= segments.last.next_offset < base:
                # A hole past the recovery point: the previous segment lost an unsynced tail
                # that a power loss did not take from this later file (or the hole was never
                # flushed). Nothing beyond it was promised; the log ends at the hole.
                truncated_bytes += self._delete(bases[i:])
                break
            path = os.path.join(self._dir, f"{base:020d}.log")
            file_size = os.path.getsize(path)
            meta = metas.get(base)
            trusted = (
                meta is not None and meta.size == file_size and meta.next_offset <= recovery_point
            )
            segment = self._segment(base, meta if trusted else None)
            if trusted and not self._index_consistent(segment):
                trusted = False
            if trusted:
                segment.meta_dirty = False
            else:
                recovered += 1
                before = file_size
                if segment.recover():
                    truncated_bytes += before - segment.size
                    segments.add(segment)
                    self._write_index(segment)
                    # Everything after a corrupt batch is lost.
                    truncated_bytes += self._delete(bases[i + 1 :])
                    break
                self._write_index(segment)
            segments.add(segment)

        log_start = checkpointed_start if checkpointed_start is not None else 0
        if len(segments):
            log_start = max(log_start, segments.first.base_offset)
            if log_start > segments.last.next_offset:
                for segment in segments.clear():
                    segment.delete()
        if not len(segments):
            segment = self._segment(log_start)
            self._write_index(segment)
            segments.add(segment)
        segments.last.active = True
        recovery_point = min(recovery_point, segments.last.next_offset)
        return LoadedLog(segments, log_start, recovery_point, recovered, truncated_bytes)

    def _delete(self, bases: list[int]) -> int:
        """Delete the segments of ``bases`` with their index entries; returns their bytes."""
        removed = 0
        for base in bases:
            removed += os.path.getsize(os.path.join(self._dir, f"{base:020d}.log"))
            LogSegment(self._dir, self._tp, base, self._index, 1, self._handles).delete()
        return removed

    def _index_consistent(self, segment: LogSegment) -> bool:
        """Drop index entries past the segment's end; False if the rest cannot be trusted."""
        last = self._index.last_offset_entry(segment.prefix)
        if last is not None and last[0] >= segment.next_offset:
            self._index.truncate_segment(segment.prefix, segment.next_offset)
            last = self._index.last_offset_entry(segment.prefix)
        return last is None or last[1] < segment.size

    def _write_index(self, segment: LogSegment) -> None:
        offsets, times = segment.take_pending()
        self._index.put(offsets, times, [(segment.prefix, segment.meta)])
