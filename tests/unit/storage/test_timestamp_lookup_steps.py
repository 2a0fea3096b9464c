"""Timestamp lookups walk a stored batch's records in steps (issue 15: a ListOffsets by
timestamp over a stored zstd batch of 2 million tiny records decoded every record on the event
loop, 18.5 s; now the walk reads only each record's timestamp and offset deltas and yields to
the handler every RECORDS_PER_STEP records, so the loop serves others in between).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pydmq.engines.segment import SegmentStorageEngine
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_record_timestamps,
    parse_batch_header,
)
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.storage.log import RECORDS_PER_STEP, AppendPolicy, UnifiedLog

pytestmark = pytest.mark.timeout(120)

ZSTD = 4
POLICY = AppendPolicy(
    max_message_bytes=1 << 24,
    log_append_time=False,
    timestamp_before_max_ms=2**62,
    timestamp_after_max_ms=2**62,
    flush_messages=2**63 - 1,
)
COUNT = 3 * RECORDS_PER_STEP + 17  # tiny records, as a decompression bomb packs them
BASE_TS = 1_700_000_000_000


def _bomb() -> bytes:
    records = [SimpleRecord(None, b"", timestamp=BASE_TS + i // 3) for i in range(COUNT)]
    return build_batch(records, compression=ZSTD)


def test_the_walk_reads_what_decode_reads() -> None:
    batch = _bomb()
    header = parse_batch_header(batch, 0)
    walked = list(iter_record_timestamps(batch, header))
    assert walked == [(r.offset, r.timestamp) for r in decode_records(batch, header)]
    assert len(walked) == COUNT


def test_lookups_give_the_loop_back_every_step(tmp_path: Path) -> None:
    engine = SegmentStorageEngine(str(tmp_path), {})
    log = UnifiedLog(engine.open_log(TopicPartition("bomb", 0), LogConfig()))
    log.append_as_leader(memoryview(bytearray(_bomb())), 0, POLICY)
    try:
        # The last timestamp: nearly the whole batch is walked, in steps.
        last = BASE_TS + (COUNT - 1) // 3
        steps = log.offset_by_timestamp_steps(last)
        yielded = []
        while True:
            try:
                yielded.append(next(steps))
            except StopIteration as done:
                answer = done.value
                break
        assert yielded == [RECORDS_PER_STEP] * (COUNT // RECORDS_PER_STEP)
        assert answer is not None and (answer.offset, answer.timestamp) == (
            3 * ((COUNT - 1) // 3),
            last,
        )
        assert log.fetch_offset_by_timestamp(last + 1) is None  # past every record
        # A timestamp inside: the first record at or after it, found in the right step.
        target = BASE_TS + (2 * RECORDS_PER_STEP) // 3
        found = log.fetch_offset_by_timestamp(target)
        assert found is not None and (found.offset, found.timestamp) == (
            3 * (target - BASE_TS),
            target,
        )
        top = log.max_timestamp_and_offset()
        assert top is not None and top.timestamp == last
        assert sum(1 for _ in log.max_timestamp_steps()) == COUNT // RECORDS_PER_STEP
    finally:
        engine.close()
