"""LogSegments: the segments of one log ordered by base offset, with floor lookups.

Owned by its :class:`~pydmq.engines.segment.log.SegmentLog`.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Iterator

from pydmq.engines.segment.segment import LogSegment

__all__ = ["LogSegments"]


class LogSegments:
    """An ordered map base offset -> :class:`LogSegment` (bisect over a sorted key list)."""

    __slots__ = ("_bases", "_by_base")

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._bases)

    def __iter__(self) -> Iterator[LogSegment]:
        return (self._by_base[b] for b in list(self._bases))

    def add(self, segment: LogSegment) -> None:
        if segment.base_offset in self._by_base:
            raise ValueError(f"segment {segment.base_offset} already present")
        insort(self._bases, segment.base_offset)
        self._by_base[segment.base_offset] = segment

    def remove(self, base_offset: int) -> LogSegment:
        self._bases.remove(base_offset)
        return self._by_base.pop(base_offset)

    def clear(self) -> list[LogSegment]:
        removed = [self._by_base[b] for b in self._bases]
        self._bases.clear()
        self._by_base.clear()
        return removed

    @property
    def first(self) -> LogSegment:
        return self._by_base[self._bases[0]]

    @property
    def last(self) -> LogSegment:
        return self._by_base[self._bases[-1]]

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset``."""
        i = bisect_right(self._bases, offset)
        return self._by_base[self._bases[i - 1]] if i else None

    def from_offset(self, offset: int) -> Iterator[LogSegment]:
        """Segments from the floor of ``offset`` (or the first) to the last."""
        i = max(bisect_right(self._bases, offset) - 1, 0)
        return (self._by_base[b] for b in self._bases[i:])

    def higher(self, base_offset: int) -> LogSegment | None:
        i = bisect_right(self._bases, base_offset)
        return self._by_base[self._bases[i]] if i < len(self._bases) else None

    def bases(self) -> list[int]:
        return list(self._bases)
