"""ConsumerProtocol bytes for DescribeGroups answers about consumer groups (Kafka 4 style).

DescribeGroups carries each member's subscription and assignment in the classic embedded
``consumer`` protocol format; a KIP-848 group has none, so they are synthesised: a
ConsumerProtocolSubscription v0 (topics, null user data) and a ConsumerProtocolAssignment v0
(topic, partitions; null user data), the versions every client parses.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

__all__ = ["encode_assignment", "encode_subscription"]


def _string(s: str) -> bytes:
    data = s.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def encode_subscription(topics: Iterable[str]) -> bytes:
    names = sorted(topics)
    out = bytearray(struct.pack(">hi", 0, len(names)))
    for name in names:
        out += _string(name)
    out += struct.pack(">i", -1)
    return bytes(out)


def encode_assignment(assignment: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(assignment)))
    for topic, partitions in assignment:
        out += _string(topic)
        out += struct.pack(">i", len(partitions))
        for p in partitions:
            out += struct.pack(">i", p)
    out += struct.pack(">i", -1)
    return bytes(out)
