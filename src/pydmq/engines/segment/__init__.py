"""The ``segment`` storage engine: Kafka-style segment files with LMDB offset/time indexes.

Decomposed like Kafka's log layer: :class:`LogSegment` (one file), :class:`LogSegments`
(ordered by base offset), :class:`SegmentLog` (one partition, a ``PartitionLog``),
:class:`LogLoader` (recovery) and :class:`SegmentStorageEngine` (one data directory).
Registered by :mod:`pydmq.engines.segment.plugin`.
"""

from pydmq.engines.segment.engine import SegmentStorageEngine
from pydmq.engines.segment.index import LogIndex
from pydmq.engines.segment.loader import LogLoader
from pydmq.engines.segment.log import SegmentLog
from pydmq.engines.segment.segment import LogSegment
from pydmq.engines.segment.segments import LogSegments

__all__ = [
    "LogIndex",
    "LogLoader",
    "LogSegment",
    "LogSegments",
    "SegmentLog",
    "SegmentStorageEngine",
]
