"""The pydmq storage-engine conformance suite, run against the SQLite engine."""

from __future__ import annotations

from pydmq_sqlite import SqliteStorageEngine

from pydmq.plugins.host import PluginHost
from pydmq.storage.api import StorageEngine
from pydmq.testing.conformance import StorageEngineConformance


class TestSqliteEngine(StorageEngineConformance):
    def make_engine(self, data_dir: str) -> StorageEngine:
        return SqliteStorageEngine(data_dir, {})


def test_registered_through_the_entry_point() -> None:
    engines = PluginHost().storage_engines()
    assert engines["sqlite"].factory is SqliteStorageEngine
