"""OffsetMap: key -> latest offset of the dirty section, bounded like Kafka's SkimpyOffsetMap.

Sans-IO. Owned by one cleaner thread for one cleaning.
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["DEDUPE_BUFFER_LOAD_FACTOR", "ENTRY_BYTES", "OffsetMap"]

# Kafka's SkimpyOffsetMap: an MD5 of the key (16 bytes) and an offset (8 bytes) per slot, and
# log.cleaner.io.buffer.load.factor (0.9) of the slots used before the map counts as full.
ENTRY_BYTES: Final = 16 + 8
DEDUPE_BUFFER_LOAD_FACTOR: Final = 0.9
_EXACT_KEY_BYTES: Final = 64


class OffsetMap:
    """The last offset of each key seen in the dirty section.

    ``dedupe_buffer_bytes`` (``log.cleaner.dedupe.buffer.size`` divided among the cleaner
    threads) bounds the number of keys as Kafka bounds it: ``bytes / 24`` slots, full at 90 %.
    Python's dict costs more memory per entry than Kafka's slots; the bound on entries is the
    same, so a log needs as many passes here as in Kafka."""

    __slots__ = ("_offsets", "capacity", "latest_offset")

    def __init__(self, dedupe_buffer_bytes: int) -> None:
        slots = dedupe_buffer_bytes // ENTRY_BYTES
        self.capacity = max(1, int(slots * DEDUPE_BUFFER_LOAD_FACTOR))
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the largest offset put (Kafka's latestOffset)

    def __len__(self) -> int:
        return len(self._offsets)

    @staticmethod
    def _hash(key: bytes) -> bytes:
        """Keys up to 64 bytes are their own entry (exact, and no hashing cost); longer ones
        are their MD5, as Kafka's every key (a collision is as unlikely as there)."""
        if len(key) <= _EXACT_KEY_BYTES:
            return key
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[self._hash(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The last offset of ``key`` in the map, or -1."""
        return self._offsets.get(self._hash(key), -1)

    def room_for(self, keys: int) -> bool:
        """Whether ``keys`` more keys fit below the load factor (new or not: as Kafka, a batch
        is mapped only if all its records could be new keys)."""
        return len(self._offsets) + keys <= self.capacity

    def clear(self) -> None:
        self._offsets.clear()
        self.latest_offset = -1
