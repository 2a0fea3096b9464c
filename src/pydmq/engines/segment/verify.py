"""Validation of stored segment bytes: batch framing, CRC32C and offset order.

:func:`check_batches` walks whole batches and stops at the first damaged one; :func:`find_resume`
looks past a damaged region for the next intact batch; :class:`CheckedRanges` remembers which
byte ranges of a segment were validated, so that each byte is checked once however often it
is read. Used by :class:`~pydmq.engines.segment.segment.LogSegment` (reads, recovery) on the
broker's event loop.
"""

from __future__ import annotations

import mmap
from bisect import bisect_right
from dataclasses import dataclass

from pydmq.protocol.batch_header import BATCH_HEADER_SIZE, HEADER, LOG_OVERHEAD, MAGIC, MAGIC_AT
from pydmq.protocol.records import BatchHeader, CorruptRecordError, validate_crc

__all__ = ["CheckedRanges", "Damage", "check_batches", "find_resume", "header_from"]

_MAGIC_BYTE = bytes([MAGIC])


def header_from(buf: bytes | memoryview | mmap.mmap, offset: int, position: int) -> BatchHeader:
    """Parse a header at ``offset`` of ``buf``; ``position`` is recorded as its file position."""
    if len(buf) - offset < BATCH_HEADER_SIZE:
        raise CorruptRecordError("truncated batch header")
    fields = HEADER.unpack_from(buf, offset)
    if fields[3] != MAGIC or fields[1] < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError("bad batch framing")
    return BatchHeader(position, *fields)


@dataclass(frozen=True, slots=True)
class Damage:
    """The first damaged batch of a walk: where it starts and which offset it should hold.

    ``misplaced``: the batch itself is intact (framing and CRC32C) but its base offset is below
    the end of the batches before it (or below the segment's base offset): it is not where it
    belongs, as in a file named after the wrong offset.
    """

    position: int
    offset: int
    reason: str
    misplaced: bool = False


def check_batches(
    buf: bytes | memoryview,
    start: int,
    end: int,
    expected_offset: int,
    *,
    shift: int = 0,
) -> tuple[list[BatchHeader], Damage | None]:
    """Validate the whole batches of ``buf[start:end]``: framing, CRC32C, increasing offsets.

    ``expected_offset`` is the lowest base offset the first batch may have (-1: any).
    Returns the headers of the intact batches before the first damaged one (their positions are
    ``buf`` positions) and that damage (``None`` when every byte up to ``end`` is intact);
    damage positions are ``buf`` positions plus ``shift`` (file positions).
    """
    headers: list[BatchHeader] = []
    position = start
    while position < end:
        misplaced = False
        try:
            header = header_from(buf, position, position)
            if position + header.size > end:
                raise CorruptRecordError(f"batch of {header.size} bytes runs past byte {end}")
            validate_crc(buf, header)
            if header.base_offset < expected_offset:
                misplaced = True
                raise CorruptRecordError(
                    f"batch base offset {header.base_offset} below offset {expected_offset}"
                )
        except CorruptRecordError as exc:
            offset = expected_offset
            if offset < 0:
                offset = _base_offset_or(buf, position, -1)
            return headers, Damage(position + shift, offset, str(exc), misplaced)
        headers.append(header)
        position += header.size
        expected_offset = header.next_offset
    return headers, None


def _base_offset_or(buf: bytes | memoryview, position: int, default: int) -> int:
    try:
        return header_from(buf, position, position).base_offset
    except CorruptRecordError:
        return default


def find_resume(
    mm: mmap.mmap, after: int, end: int, min_offset: int, max_offset: int
) -> BatchHeader | None:
    """The first intact batch starting in ``(after, end)`` whose offsets lie in
    ``[min_offset, max_offset)``: where reads may resume after damage at ``after``.

    Candidates are the positions whose magic byte is 2; each is checked for framing, bounds,
    offsets and CRC32C. Runs once per damaged region found, never on the read path of intact
    data.
    """
    search = after + 1 + MAGIC_AT
    with memoryview(mm) as view:
        while True:
            found = mm.find(_MAGIC_BYTE, search, end)
            if found < 0:
                return None
            candidate = found - MAGIC_AT
            search = found + 1
            try:
                header = header_from(view, candidate, candidate)
                if (
                    candidate + header.size > end
                    or header.base_offset < min_offset
                    or header.next_offset > max_offset
                ):
                    continue
                validate_crc(view, header)
            except CorruptRecordError:
                continue
            return header


class CheckedRanges:
    """Disjoint, sorted byte ranges ``[start, end)`` of one segment whose batches were
    validated. Sequential reads extend one range, so the list stays short."""

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def covers(self, start: int, end: int) -> bool:
        i = bisect_right(self._starts, start) - 1
        return i >= 0 and self._ends[i] >= end

    def unchecked_from(self, start: int) -> int:
        """Where checking must begin for a range starting at ``start`` (batch-aligned)."""
        i = bisect_right(self._starts, start) - 1
        return self._ends[i] if i >= 0 and self._ends[i] > start else start

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        starts, ends = self._starts, self._ends
        i = bisect_right(starts, start) - 1
        if i >= 0 and ends[i] >= start:
            start = starts[i]
        else:
            i += 1
        j = i
        while j < len(starts) and starts[j] <= end:
            end = max(end, ends[j])
            j += 1
        starts[i:j] = [start]
        ends[i:j] = [end]

    def clip(self, size: int) -> None:
        """Forget everything at or past ``size`` (the file was truncated there)."""
        starts, ends = self._starts, self._ends
        while starts and starts[-1] >= size:
            starts.pop()
            ends.pop()
        if ends and ends[-1] > size:
            ends[-1] = size
