"""The storage-engine conformance suite, run against the built-in engines."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydmq.engines.memory import MemoryStorageEngine
from pydmq.engines.segment import SegmentStorageEngine
from pydmq.protocol.records import iter_batch_headers
from pydmq.storage.api import StorageEngine, TopicPartition
from pydmq.testing.conformance import StorageEngineConformance


def flip_a_record_byte(data_dir: str, tp: TopicPartition, offset: int) -> bool:
    """Flip one bit in the last record of the batch holding ``offset`` (a segment file)."""
    for path in sorted((Path(data_dir) / f"{tp.topic}-{tp.partition}").glob("*.log")):
        data = bytearray(path.read_bytes())
        for h in iter_batch_headers(bytes(data)):
            if h.base_offset <= offset <= h.last_offset:
                data[h.position + h.size - 3] ^= 0x04
                path.write_bytes(bytes(data))
                return True
    return False


class TestSegmentEngine(StorageEngineConformance):
    def make_engine(self, data_dir: str) -> StorageEngine:
        return SegmentStorageEngine(data_dir, {})

    def damage_batch(self, data_dir: str, tp: TopicPartition, offset: int) -> bool:
        return flip_a_record_byte(data_dir, tp, offset)


class TestSegmentEngineMmapActive(StorageEngineConformance):
    model_examples: ClassVar[int] = 20

    def damage_batch(self, data_dir: str, tp: TopicPartition, offset: int) -> bool:
        return flip_a_record_byte(data_dir, tp, offset)

    def make_engine(self, data_dir: str) -> StorageEngine:
        return SegmentStorageEngine(
            data_dir, {"active.segment.read": "mmap", "index.flush.ms": "0"}
        )


class TestMemoryEngine(StorageEngineConformance):
    persistent: ClassVar[bool] = False

    def make_engine(self, data_dir: str) -> StorageEngine:
        return MemoryStorageEngine(data_dir, {})
