"""LogLoader: opens a partition directory, checks its segments against each other, recovers the
unflushed tail and repairs indexes. Used once per log open, on the broker's event loop.

Segments are the truth, and the recovery point R (the offset below which everything was
fsynced) tells what a crash may have damaged: bytes at or past R may be torn by a crash or a
power loss (our own doing, repaired as Kafka does); bytes below R were promised durable, so
damage there is corruption, never repaired silently. The rules, in order:

1. A ``*.swap`` file is a compaction swap that must complete (see
   :mod:`~pydmq.engines.segment.compaction`): the segments it replaces are removed and it
   takes its final name. ``*.tmp``, ``*.truncating`` and ``*.cleaned`` files are our own
   leftovers of an atomic write, a truncation copy or an unfinished cleaning (the original is
   intact): deleted. ``*.stray`` files are left alone.
2. A segment file whose base offset lies inside the previous segment's offsets (an overlap):
   empty, it is a stray and is set aside (renamed ``<name>.stray``, WARNING); with data, the
   open is refused (:class:`~pydmq.storage.api.StorageCorruptionError` naming both files):
   no crash of ours leaves one, and which copy is right is for an operator to say.
3. A segment whose first batch is intact but has a base offset below its file name: the open is
   refused (we always name a segment after its first batch).
4. A hole past R (a segment ends before the next one's base, at or past R): a power loss took
   the segment's unsynced tail; the log ends at the hole and the later segments are set aside
   (WARNING).
5. A segment wholly below R whose LMDB metadata matches its file size is trusted without a scan
   after cheap checks: its first batch's header, and the batch its last index entry names.
   When they disagree (WARNING) it is scanned like the others, and its index rebuilt.
6. Every other segment is scanned (framing, CRC32C, offset order). Damage at or past R is a torn
   tail: the file is cut there and the later segments are set aside (WARNING). Damage below R
   (or a file shorter than its metadata says was flushed, or a segment file missing between two
   others while its metadata says it was flushed) is corruption: a ``replicated`` log (a
   follower in cluster mode: the leader has the data) is truncated before it, at ERROR, and
   fetches the rest again; any other log refuses to open (StorageCorruptionError naming the
   file, byte position and offset), so a single node never drops flushed data silently.
7. A gap between segments below R is kept (offsets the appender skipped), unless rule 6 says a
   flushed file lost bytes.

Segments trusted in rule 5 are not CRC-checked at load (a start-up costs no full read of the
log): :class:`~pydmq.engines.segment.segment.LogSegment` checks their bytes on first read and
fails the reads over damage. A ``replicated`` log scans every segment instead, so that a
follower, which never reads its own log, finds damage at load and fetches it again.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from pydmq.engines.segment.compaction import CLEANED_SUFFIX, complete_swaps
from pydmq.engines.segment.handles import FileHandleCache
from pydmq.engines.segment.index import LogIndex, SegmentMeta, segment_prefix
from pydmq.engines.segment.prescan import RecoveryPrescan
from pydmq.engines.segment.segment import LogSegment
from pydmq.engines.segment.segments import LogSegments
from pydmq.engines.segment.verify import Damage
from pydmq.protocol.records import CorruptRecordError
from pydmq.storage.api import LogConfig, StorageCorruptionError, TopicPartition
from pydmq.storage.checkpoint import read_offset_checkpoint

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "STRAY_SUFFIX",
    "LoadedLog",
    "LogLoader",
]

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "_recovery-point.checkpoint"
LOG_START_OFFSET_CHECKPOINT = "_log-start-offset.checkpoint"
STRAY_SUFFIX = ".stray"
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")
_LEFTOVER_SUFFIXES = (".tmp", ".truncating", CLEANED_SUFFIX)


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
        prescan: RecoveryPrescan | None = None,
    ) -> None:
        self._dir = log_dir
        self._prescan = prescan
        self._tp = tp
        self._config = config
        self._index = index
        self._read_mode = read_mode
        self._recovery_point = 0
        self._handles = handles

    def _path(self, base: int) -> str:
        return os.path.join(self._dir, f"{base:020d}.log")

    def _segment(self, base_offset: int, meta: SegmentMeta | None = None) -> LogSegment:
        return LogSegment(
            self._dir,
            self._tp,
            base_offset,
            self._index,
            self._config.index_interval_bytes,
            self._handles,
            read_mode=self._read_mode,
            meta=meta,
        )

    def _list_segments(self) -> list[int]:
        if complete_swaps(self._dir, self._tp, self._index):
            log.warning("%s: completed a compaction swap interrupted by a crash", self._tp)
        bases: list[int] = []
        for name in os.listdir(self._dir):
            if name.endswith(_LEFTOVER_SUFFIXES):
                os.unlink(os.path.join(self._dir, name))
                continue
            m = _SEGMENT_FILE.match(name)
            if m:
                bases.append(int(m.group(1)))
        return sorted(bases)

    def load(self) -> LoadedLog:
        # The directory exists (the engine created it). Its entry in the data dir may not be
        # durable yet: the log makes it so before it promises anything (SharedDurability).
        bases = self._list_segments()
        checkpointed_start = read_offset_checkpoint(
            os.path.join(self._dir, LOG_START_OFFSET_CHECKPOINT)
        )
        recovery_point = (
            read_offset_checkpoint(os.path.join(self._dir, RECOVERY_POINT_CHECKPOINT)) or 0
        )
        self._recovery_point = recovery_point
        metas = self._index.segment_metas(self._tp)
        bases = self._check_missing(bases, metas)

        segments = LogSegments()
        try:
            recovered, truncated_bytes = self._load_segments(bases, metas, segments)
        except StorageCorruptionError:
            for segment in segments.clear():
                segment.close()
            raise

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

    def _load_segments(
        self, bases: list[int], metas: dict[int, SegmentMeta], segments: LogSegments
    ) -> tuple[int, int]:
        """Rules 2-7 over the segment files, in offset order, into ``segments``; returns
        (segments scanned, bytes dropped)."""
        recovery_point = self._recovery_point
        recovered = 0
        truncated_bytes = 0
        for i, base in enumerate(bases):
            following = bases[i + 1] if i + 1 < len(bases) else None
            if len(segments) and base < segments.last.next_offset:
                truncated_bytes += self._overlap(segments.last, base)
                continue
            if len(segments) and recovery_point <= segments.last.next_offset < base:
                # A hole past the recovery point: the previous segment lost an unsynced tail
                # that a power loss did not take from this later file (or the hole was never
                # flushed). Nothing beyond it was promised; the log ends at the hole.
                truncated_bytes += self._set_aside(bases[i:], "they follow a hole")
                break
            file_size = os.path.getsize(self._path(base))
            meta = metas.get(base)
            if meta is not None and meta.size == file_size and meta.next_offset <= recovery_point:
                segment = self._segment(base, meta)
                if self._trusted(segment, following):
                    segment.meta_dirty = False
                    segments.add(segment)
                    continue
                segment.close()
            recovered += 1
            segment = self._segment(base)
            damage = segment.recover(self._prescan)
            if (
                damage is None
                and meta is not None
                and segment.next_offset < meta.next_offset <= recovery_point
            ):
                damage = Damage(
                    file_size,
                    segment.next_offset,
                    f"the file holds {file_size} bytes, {meta.size} were flushed",
                )
            if damage is not None:
                truncated_bytes += self._damaged(segment, damage, following)
            self._index.delete_segment(segment.prefix, keep_meta=True)
            self._write_index(segment)
            segments.add(segment)
            if damage is not None and following is not None and segment.next_offset < following:
                # Everything after the damage is lost (unflushed, or fetched again).
                truncated_bytes += self._set_aside(bases[i + 1 :], "they follow damaged data")
                break
        return recovered, truncated_bytes

    # -- checks ----------------------------------------------------------------------------

    def _check_missing(self, bases: list[int], metas: dict[int, SegmentMeta]) -> list[int]:
        """Drop the metadata of segments whose file is gone (deleted by retention or
        truncation before a crash); a flushed segment missing between two others is damage
        (rule 6): returns the bases to load."""
        for stale in sorted(set(metas) - set(bases)):
            meta = metas[stale]
            missing = (
                bases
                and bases[0] < stale < bases[-1]
                and meta.size
                and meta.next_offset <= self._recovery_point
            )
            if missing:
                before = [b for b in bases if b < stale]
                problem = (
                    f"{self._path(stale)} is missing: it held offsets [{stale}, "
                    f"{meta.next_offset}), flushed"
                )
                if not self._config.replicated:
                    self._refuse(problem, self._path(stale), 0, stale)
                log.error(
                    "%s: %s; truncating the log to offset %d (the leader's copy is fetched again)",
                    self._tp,
                    problem,
                    stale,
                )
                self._set_aside([b for b in bases if b > stale], "they follow a missing segment")
                bases = before
            self._index.delete_segment(segment_prefix(self._tp, stale))
        return bases

    def _overlap(self, previous: LogSegment, base: int) -> int:
        """Rule 2: a segment file whose base offset lies inside ``previous``'s offsets."""
        path = self._path(base)
        size = os.path.getsize(path)
        if size:
            self._refuse(
                f"{path} ({size} bytes) starts at offset {base}, inside the offsets "
                f"[{previous.base_offset}, {previous.next_offset}) of {previous.path}",
                path,
                0,
                base,
            )
        self._set_aside([base], "it is empty and lies inside the previous segment's offsets")
        return 0

    def _trusted(self, segment: LogSegment, following: int | None) -> bool:
        """Rule 5: cheap checks of a segment trusted by its metadata (no CRC32C pass)."""
        if self._config.replicated:
            return False
        problem = self._index_problem(segment, following)
        if problem is None:
            return True
        log.warning("%s: %s: scanning the segment and rebuilding its index", segment.path, problem)
        return False

    def _index_problem(self, segment: LogSegment, following: int | None) -> str | None:
        """What disagrees between a trusted segment's file and its index, if anything."""
        if segment.is_empty:
            return None
        index = self._index
        last = index.last_offset_entry(segment.prefix)
        if last is not None and last[0] >= segment.next_offset:
            index.truncate_segment(segment.prefix, segment.next_offset)
            last = index.last_offset_entry(segment.prefix)
        try:
            first = segment.peek_header(0)
            named = segment.peek_header(last[1]) if last is not None else first
        except CorruptRecordError as exc:
            return f"{exc} (a header at byte 0 or {last[1] if last else 0})"
        if first.base_offset < segment.base_offset:
            return f"its first batch starts at offset {first.base_offset}"
        if following is not None and segment.next_offset > following:
            return f"its metadata says it ends at offset {segment.next_offset}"
        if last is not None and named.base_offset != last[0]:
            return f"its index names offset {last[0]} at byte {last[1]}"
        return None

    def _damaged(self, segment: LogSegment, damage: Damage, following: int | None) -> int:
        """Rules 3 and 6: ``segment.recover()`` found ``damage``; cut the file there when that
        loses nothing promised (or the log is replicated), else refuse. Returns bytes cut."""
        if damage.misplaced and damage.position == 0:
            segment.close()
            self._refuse(
                f"{segment.path}: its first batch has base offset {damage.offset}"
                f" ({damage.reason}), not the file name's",
                segment.path,
                0,
                segment.base_offset,
            )
        flushed_end = (
            self._recovery_point if following is None else min(self._recovery_point, following)
        )
        what = (
            f"{segment.path}: {damage.reason} at byte {damage.position} (offset "
            f"{segment.next_offset})"
        )
        if segment.next_offset >= flushed_end:
            log.warning(
                "%s, past the recovery point %d: an unflushed tail torn by a crash, cut there",
                what,
                self._recovery_point,
            )
        elif self._config.replicated:
            log.error(
                "%s, below the recovery point %d: truncating the log to offset %d (the "
                "leader's copy is fetched again)",
                what,
                self._recovery_point,
                segment.next_offset,
            )
        else:
            segment.close()
            self._refuse(
                f"{what}, below the recovery point {self._recovery_point}: offsets "
                f"[{segment.next_offset}, {flushed_end}) were flushed and cannot be read",
                segment.path,
                damage.position,
                segment.next_offset,
            )
        return segment.discard_damaged_tail()

    def _refuse(self, problem: str, path: str, position: int, offset: int) -> None:
        raise StorageCorruptionError(
            f"{self._tp}: refusing to open the log: {problem}. Nothing was changed; move the "
            f"file aside or restore it to start",
            path,
            position,
            offset,
        )

    # -- files and index ------------------------------------------------------------------------

    def _set_aside(self, bases: list[int], why: str) -> int:
        """Rename segment files to ``<name>.stray`` (never deleted) with their index entries
        dropped; returns their bytes."""
        moved = 0
        for base in bases:
            path = self._path(base)
            size = os.path.getsize(path)
            target = path + STRAY_SUFFIX
            n = 1
            while os.path.exists(target):
                target = f"{path}.{n}{STRAY_SUFFIX}"
                n += 1
            os.rename(path, target)
            self._index.delete_segment(segment_prefix(self._tp, base))
            log.warning("%s: moved aside as %s (%d bytes): %s", path, target, size, why)
            moved += size
        return moved

    def _write_index(self, segment: LogSegment) -> None:
        offsets, times = segment.take_pending()
        self._index.put(offsets, times, [(segment.prefix, segment.meta)])
