"""The built-in engines register through the same hook a third-party engine uses."""

from __future__ import annotations

from pydmq.engines.memory import MemoryStorageEngine
from pydmq.engines.segment import SegmentStorageEngine
from pydmq.plugins.host import PluginHost
from pydmq.storage.api import LogConfig, PartitionLog, StorageEngine, TopicPartition


def test_builtin_engines_are_registered() -> None:
    engines = PluginHost(load_entry_points=False).storage_engines()
    assert engines["segment"].factory is SegmentStorageEngine
    assert engines["memory"].factory is MemoryStorageEngine


def test_engines_satisfy_the_ports(tmp_path: object) -> None:
    for factory in (SegmentStorageEngine, MemoryStorageEngine):
        engine = factory(str(tmp_path), {})
        assert isinstance(engine, StorageEngine)
        assert isinstance(engine.open_log(TopicPartition("t", 0), LogConfig()), PartitionLog)
        engine.close()
