"""Storage crash points: a child process dies at each named failpoint; the log must recover.

For every point of :data:`pydmq.failpoints.POINTS` a child Python process opens a
:class:`SegmentStorageEngine` in a temporary directory with ``PYDMQ_FAILPOINTS`` set, appends
batches whose records carry their own offset (``v<offset>``), calls ``flush()`` every few
batches and prints ``flushed <log end offset>`` after each flush returned (the durability
promise), and dies with status 137 at the point. The parent then reopens the engine and checks:

* everything promised (every offset below the last printed log end offset) is present;
* the log is a contiguous run of whole, CRC-valid batches from log start to log end (a torn
  tail was truncated, never served);
* every offset reads back, through ``read()``, as the batch that contains it with the right
  value; every index entry points at the header of the batch it names; every timestamp lookup
  finds the first batch reaching that timestamp;
* the log accepts new appends, which survive a clean reopen.

A process crash keeps what was written to the page cache; what only a power loss would drop
(unsynced data) is not simulated here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pydmq.engines.segment.engine import SegmentStorageEngine
from pydmq.failpoints import CRASH_EXIT_CODE, ENV_VAR, POINTS, parse_spec
from pydmq.protocol.records import (
    SimpleRecord,
    build_batch,
    decode_records,
    iter_batch_headers,
    validate_crc,
)
from pydmq.storage.api import LogConfig, TopicPartition

pytestmark = pytest.mark.timeout(60)

TP = TopicPartition("crash", 0)
BASE_TS = 1_700_000_000_000
RECORDS_PER_BATCH = 3
SEGMENT_BYTES = 4096
INDEX_INTERVAL = 512


def config(retention_ms: int = -1) -> LogConfig:
    return LogConfig(
        segment_bytes=SEGMENT_BYTES,
        index_interval_bytes=INDEX_INTERVAL,
        retention_ms=retention_ms,
    )


# The child: appends ``batches`` batches, flushing every ``flush_every`` (and printing the
# promise), then optionally flushes once more and applies time retention. It must die at the
# failpoint before reaching the end; reaching the end exits 0 (the parent fails the test).
CHILD = textwrap.dedent(
    """
    import sys
    from pydmq.engines.segment.engine import SegmentStorageEngine
    from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
    from pydmq.storage.api import LogConfig, TopicPartition

    data_dir = sys.argv[1]
    batches, flush_every, retention, segment_bytes, interval, base_ts, per_batch = map(
        int, sys.argv[2:9]
    )
    engine = SegmentStorageEngine(data_dir, {"index.flush.ms": "0"})
    log = engine.open_log(
        TopicPartition("crash", 0),
        LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                  retention_ms=1 if retention else -1),
    )
    print("opened", log.log_end_offset, flush=True)
    for i in range(batches):
        base = log.log_end_offset
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % (base + j), (), base_ts + base + j)
             for j in range(per_batch)],
            base_offset=base,
        )
        log.append(batch, list(iter_batch_headers(batch)))
        if (i + 1) % flush_every == 0:
            log.flush()
            print("flushed", log.log_end_offset, flush=True)
    if retention:
        log.flush()
        print("flushed", log.log_end_offset, flush=True)
        log.delete_retention_ms_breached(base_ts + 10**12)
    print("finished", flush=True)
    """
)

# point -> (action, batches, flush_every, retention). Hit counts are chosen so that each
# crash happens with flushed data, unflushed data and (mostly) several segments behind it.
CASES: dict[str, tuple[str, int, int, int]] = {
    "segment.append.before_write": ("crash-after=40", 60, 7, 0),
    "segment.append.after_write": ("crash-after=40", 60, 7, 0),
    "index.put.before_commit": ("crash-after=25", 200, 7, 0),
    "index.put.after_commit": ("crash-after=25", 200, 7, 0),
    "segment.roll.before": ("crash-after=3", 200, 7, 0),
    "segment.roll.after": ("crash-after=3", 200, 7, 0),
    "checkpoint.rename.before": ("crash-after=4", 60, 7, 0),
    "checkpoint.rename.after": ("crash-after=4", 60, 7, 0),
    "retention.delete.segment": ("crash-after=2", 200, 7, 1),
}


def test_every_failpoint_has_a_case() -> None:
    assert set(CASES) == POINTS


def test_spec_parsing() -> None:
    assert parse_spec("") == {}
    assert parse_spec(" segment.roll.before=crash , index.put.after_commit=crash-after=3") == {
        "segment.roll.before": 1,
        "index.put.after_commit": 3,
    }
    for bad in (
        "nope=crash",
        "segment.roll.before",
        "segment.roll.before=explode",
        "segment.roll.before=crash-after=0",
        "segment.roll.before=crash-after=x",
    ):
        with pytest.raises(ValueError):
            parse_spec(bad)


def test_failpoints_disabled_cost_nothing() -> None:
    """Without the variable the bound function is the no-op (no lookup, no counting)."""
    import pydmq.failpoints as fp

    if fp.enabled():
        pytest.skip(f"{ENV_VAR} is set in this environment")
    assert fp.failpoint is fp._noop
    started = time.perf_counter()
    for _ in range(100_000):
        fp.failpoint("segment.append.before_write")
    assert time.perf_counter() - started < 0.5


def run_child(data_dir: Path, point: str) -> tuple[int, list[str], str]:
    action, batches, flush_every, retention = CASES[point]
    env = {**os.environ, ENV_VAR: f"{point}={action}"}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(data_dir),
            *map(str, (batches, flush_every, retention, SEGMENT_BYTES, INDEX_INTERVAL)),
            *map(str, (BASE_TS, RECORDS_PER_BATCH)),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return proc.returncode, proc.stdout.splitlines(), proc.stderr


def promised_end(lines: list[str]) -> int:
    promised = 0
    for line in lines:
        word, _, value = line.partition(" ")
        if word == "flushed":
            promised = int(value)
    return promised


def check_log(data_dir: Path, promised: int, *, retention: bool) -> tuple[int, int]:
    """Reopen and check every invariant; returns (log start, log end)."""
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, config())
        start, end = log.log_start_offset, log.log_end_offset
        assert end >= promised, f"flushed up to {promised} but the log ends at {end}"
        if not retention:
            assert start == 0
        # Whole log, segment by segment: contiguous, whole, CRC-valid batches.
        expected = start
        segments = log.segments
        assert segments[0].base_offset <= start
        for segment in segments:
            size = os.path.getsize(segment.path)
            assert size == segment.size, f"{segment.path}: file {size} B, tracked {segment.size}"
            raw = open(segment.path, "rb").read()  # noqa: SIM115
            headers = list(iter_batch_headers(raw))  # a torn batch raises here
            for h in headers:
                validate_crc(raw, h)
                if h.base_offset >= start:
                    assert h.base_offset == expected, (segment.path, h.base_offset, expected)
                expected = max(expected, h.next_offset)
            # Index entries point at the header of the batch they name.
            by_position = {h.position: h for h in headers}
            for offset, position in engine.index.offset_entries(segment.prefix):
                assert position in by_position, f"index entry {offset}->{position} is no batch"
                assert by_position[position].base_offset == offset
        assert expected == end, f"batches end at {expected}, log end offset is {end}"
        # Every offset reads back as the batch containing it, with its own value.
        batch_ts: list[tuple[int, int]] = []
        for offset in range(start, end):
            info = log.read(offset, 1, end, True)
            buf = b"".join(bytes(b) for b in info.buffers)
            (h,) = list(iter_batch_headers(buf))
            validate_crc(buf, h)
            assert h.base_offset <= offset <= h.last_offset
            values = {r.offset: r.value for r in decode_records(buf, h)}
            assert values[offset] == b"v%d" % offset
            if h.base_offset == offset or offset == start:
                batch_ts.append((h.max_timestamp, h.base_offset))
        # Timestamp lookups through the time index: the first batch reaching each timestamp.
        for max_ts, base in batch_ts:
            found = log.fetch_offset_by_timestamp(max_ts)
            assert found is not None and found.offset == max(base, start), (max_ts, found, base)
        assert log.fetch_offset_by_timestamp(BASE_TS + end + 10) is None
        # The log accepts new appends.
        batch = build_batch(
            [SimpleRecord(b"k", b"v%d" % (end + j), (), BASE_TS + end + j) for j in range(2)],
            base_offset=end,
        )
        log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        assert log.log_end_offset == end + 2
    finally:
        engine.close()
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, config())
        assert log.log_end_offset == end + 2
        assert log.recovered_segments == 0, "a clean close needed recovery"
        info = log.read(end + 1, 1, end + 2, True)
        buf = b"".join(bytes(b) for b in info.buffers)
        (h,) = list(iter_batch_headers(buf))
        assert {r.offset: r.value for r in decode_records(buf, h)}[end + 1] == b"v%d" % (end + 1)
    finally:
        engine.close()
    return start, end


@pytest.mark.parametrize("point", sorted(CASES))
def test_crash_at_failpoint_recovers(tmp_path: Path, point: str) -> None:
    data_dir = tmp_path / "data"
    rc, lines, stderr = run_child(data_dir, point)
    assert rc == CRASH_EXIT_CODE, f"child did not crash at {point} (rc {rc}):\n{lines}\n{stderr}"
    assert f"failpoint {point}" in stderr
    assert "finished" not in lines
    promised = promised_end(lines)
    start, _ = check_log(data_dir, promised, retention=CASES[point][3] == 1)
    if point == "retention.delete.segment":
        assert start > 0, "the crash came after one segment was deleted: log start moved"
    if point.startswith("segment.roll"):
        assert len(os.listdir(data_dir / "crash-0")) >= 2
