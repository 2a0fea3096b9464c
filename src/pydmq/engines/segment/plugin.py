"""Registers the ``segment`` engine through the same hook a third-party engine uses."""

from __future__ import annotations

from pydmq.engines.segment.engine import SegmentStorageEngine
from pydmq.plugins.markers import hookimpl
from pydmq.storage.api import StorageEngineSpec

__all__ = ["pydmq_register_storage_engines"]


@hookimpl
def pydmq_register_storage_engines() -> list[StorageEngineSpec]:
    return [
        StorageEngineSpec(
            "segment",
            SegmentStorageEngine,
            "segment files per partition with LMDB offset and time indexes (default)",
        )
    ]
