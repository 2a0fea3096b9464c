"""Entry point of the ``pydmq`` group: registers the ``sqlite`` storage engine."""

from __future__ import annotations

from pydmq.plugins.markers import hookimpl
from pydmq.storage.api import StorageEngineSpec
from pydmq_sqlite.engine import SqliteStorageEngine

__all__ = ["pydmq_register_storage_engines"]


@hookimpl
def pydmq_register_storage_engines() -> list[StorageEngineSpec]:
    return [
        StorageEngineSpec("sqlite", SqliteStorageEngine, "batches as rows of one SQLite database")
    ]
