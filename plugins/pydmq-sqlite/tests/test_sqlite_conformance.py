"""The pydmq storage-engine conformance suite, run against the SQLite engine."""

from __future__ import annotations

from pathlib import Path

from pydmq_sqlite import SqliteStorageEngine

from pydmq.plugins.host import PluginHost
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.storage.api import LogConfig, StorageEngine, TopicPartition
from pydmq.testing.conformance import StorageEngineConformance, append_batches
from pydmq.testing.conformance_compaction import BASE_TS, read_all_records, run_cleaning

TP = TopicPartition("compacted", 0)


class TestSqliteEngine(StorageEngineConformance):
    def make_engine(self, data_dir: str) -> StorageEngine:
        return SqliteStorageEngine(data_dir, {})


def test_registered_through_the_entry_point() -> None:
    engines = PluginHost().storage_engines()
    assert engines["sqlite"].factory is SqliteStorageEngine


def test_a_cleaned_log_reads_the_same_after_a_reopen(tmp_path: Path) -> None:
    """The swap is one transaction: what a reopened database holds is the cleaned log."""
    engine = SqliteStorageEngine(str(tmp_path), {})
    log = engine.open_log(TP, LogConfig(segment_bytes=1, retention_ms=-1))
    for i in range(40):
        batch = build_batch(
            [SimpleRecord(b"k%d" % (i % 4), b"v%d" % i, timestamp=BASE_TS + i)], base_offset=i
        )
        append_batches(log, batch)
    size = log.size_in_bytes
    run_cleaning(log, BASE_TS + 1_000)
    cleaned = read_all_records(log)
    # k3's latest below the active batch (v39, never cleaned) is v35
    assert [value for _, _, value in cleaned] == [b"v35", b"v36", b"v37", b"v38", b"v39"]
    assert log.size_in_bytes < size // 5
    engine.close()
    reopened = SqliteStorageEngine(str(tmp_path), {})
    again = reopened.open_log(TP, LogConfig(segment_bytes=1, retention_ms=-1))
    assert read_all_records(again) == cleaned
    assert (again.log_start_offset, again.log_end_offset) == (0, 40)
    assert again.size_in_bytes == log.size_in_bytes
    reopened.close()
