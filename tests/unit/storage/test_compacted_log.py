"""UnifiedLog over a log whose cleanup.policy has compact: keys required at produce (Kafka's
LogValidator), retention only under delete; and a cleaned log's empty batches replicate."""

from __future__ import annotations

import time

import pytest

from pydmq.engines.memory import MemoryLog
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.log import AppendPolicy, LogAppendError, UnifiedLog

pytestmark = pytest.mark.timeout(30)

POLICY = AppendPolicy(1 << 20, False, 2**62, 2**62, 2**62)
TP = TopicPartition("compacted", 3)


def produce(log: UnifiedLog, *records: tuple[bytes | None, bytes | None]) -> None:
    now = int(time.time() * 1000)
    data = build_batch([SimpleRecord(k, v, (), now) for k, v in records], compression=1)
    log.append_as_leader(memoryview(bytearray(data)), 0, POLICY)


def test_a_compacted_topic_refuses_a_record_without_a_key() -> None:
    log = UnifiedLog(MemoryLog(LogConfig(compact=True), TP))
    produce(log, (b"k", b"v"), (b"k", None))  # keys and tombstones are fine
    with pytest.raises(LogAppendError) as refused:
        produce(log, (b"k", b"v"), (None, b"no key"))
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert str(refused.value) == (
        "Compacted topic cannot accept message without key in topic partition compacted-3."
    )
    assert log.log_end_offset == 2


def test_a_topic_without_compact_takes_records_without_a_key() -> None:
    log = UnifiedLog(MemoryLog(LogConfig(), TP))
    produce(log, (None, b"v"))
    assert log.log_end_offset == 1


@pytest.mark.parametrize(
    ("delete", "compact", "deleted"), [(True, False, 2), (False, True, 0), (True, True, 2)]
)
def test_retention_applies_only_with_delete_in_the_policy(
    delete: bool, compact: bool, deleted: int
) -> None:
    engine_log = MemoryLog(LogConfig(retention_ms=1, delete=delete, compact=compact), TP)
    for base in range(3):
        data = build_batch([SimpleRecord(b"k", b"v", (), 1000)], base_offset=base)
        engine_log.append(data, list(iter_batch_headers(data)))
    assert UnifiedLog(engine_log).delete_old_segments(10**13) == deleted


def test_a_follower_takes_the_empty_batch_the_cleaner_keeps() -> None:
    """The last batch of a producer id, cleaned of every record, replicates as it is."""
    from pydmq.cleaner.cleaning import BatchCleaner, CleaningRules, OffsetMapBuilder
    from pydmq.cleaner.offset_map import OffsetMap

    first = build_batch(
        [SimpleRecord(b"k", b"1", (), 1000)], producer_id=5, producer_epoch=0, base_sequence=0
    )
    second = build_batch([SimpleRecord(b"k", b"2", (), 1000)], base_offset=1)
    builder = OffsetMapBuilder(OffsetMap(1 << 16), 0, 2)
    builder.add(first)
    builder.add(second)
    empty = BatchCleaner(builder.offset_map, CleaningRules(0, 0, {5: 0})).clean(first)
    assert empty is not None
    follower = UnifiedLog(MemoryLog(LogConfig(compact=True), TP))
    follower.append_as_follower(bytes(empty) + second)
    assert follower.log_end_offset == 2
    entry = follower.producer_state.last_entry(5)
    assert entry is not None and entry.last_seq == 0
