"""Java's default partitioner for keyed records: ``toPositive(murmur2(key)) % partitions``."""

from __future__ import annotations

from typing import Final

__all__ = ["default_partition", "murmur2", "to_positive"]

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """32-bit MurmurHash2 with Kafka's seed, as a signed int (what Java's ``Utils.murmur2`` returns).

    Four-byte little-endian blocks are mixed into the hash; the 1-3 trailing bytes are folded
    in last, then the hash is avalanched.
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length - (length & 3)
    for i in range(0, blocks, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[blocks + 2] << 16
    if tail >= 2:
        h ^= data[blocks + 1] << 8
    if tail >= 1:
        h ^= data[blocks]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs)."""
    return value & 0x7FFFFFFF


def default_partition(key: bytes, partitions: int) -> int:
    """The partition Java's default partitioner picks for a non-null ``key``."""
    if partitions <= 0:
        raise ValueError("a topic has at least one partition")
    return to_positive(murmur2(key)) % partitions
