"""The storage-engine conformance suite, run against the built-in engines."""

from __future__ import annotations

from typing import ClassVar

from pydmq.engines.memory import MemoryStorageEngine
from pydmq.engines.segment import SegmentStorageEngine
from pydmq.storage.api import StorageEngine
from pydmq.testing.conformance import StorageEngineConformance


class TestSegmentEngine(StorageEngineConformance):
    def make_engine(self, data_dir: str) -> StorageEngine:
        return SegmentStorageEngine(data_dir, {})


class TestSegmentEngineMmapActive(StorageEngineConformance):
    model_examples: ClassVar[int] = 20

    def make_engine(self, data_dir: str) -> StorageEngine:
        return SegmentStorageEngine(
            data_dir, {"active.segment.read": "mmap", "index.flush.ms": "0"}
        )


class TestMemoryEngine(StorageEngineConformance):
    persistent: ClassVar[bool] = False

    def make_engine(self, data_dir: str) -> StorageEngine:
        return MemoryStorageEngine(data_dir, {})
