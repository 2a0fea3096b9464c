"""Figures for the segment engine: ``python benchmarks/segment_engine.py [data_dir]``.

Prints appends/s for 16 KB batches and the cost of tail reads of the active segment with
``pread`` and with ``mmap`` (re-mapped on growth), and of 1 MB reads of closed segments.
A script that prints figures, never a timed assertion (DESIGN.md section 7).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import sys
import tempfile
import time

from pydmq.engines.segment.engine import SegmentStorageEngine
from pydmq.protocol.records import parse_batch_header
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.testing.conformance import make_batch

TP = TopicPartition("bench", 0)


def _append(data_dir: str, n: int, flush_messages: int) -> tuple[float, float]:
    engine = SegmentStorageEngine(data_dir, {})
    log = engine.open_log(TP, LogConfig(segment_bytes=128 << 20, flush_messages=flush_messages))
    buf = bytearray(make_batch(0, 16, value_size=1_000))
    header = parse_batch_header(buf)
    pack = struct.Struct(">q").pack_into
    t0 = time.perf_counter()
    for i in range(n):
        offset = i * 16
        pack(buf, 0, offset)
        log.append(buf, (dataclasses.replace(header, base_offset=offset),))
    elapsed = time.perf_counter() - t0
    log.flush()
    total = time.perf_counter() - t0
    engine.close()
    return elapsed, total


def _tail_reads(data_dir: str, mode: str, n: int) -> float:
    engine = SegmentStorageEngine(data_dir, {"active.segment.read": mode})
    log = engine.open_log(TP, LogConfig())
    buf = bytearray(make_batch(0, 16, value_size=1_000))
    header = parse_batch_header(buf)
    pack = struct.Struct(">q").pack_into
    spent = 0.0
    for i in range(n):
        offset = i * 16
        pack(buf, 0, offset)
        log.append(buf, (dataclasses.replace(header, base_offset=offset),))
        t0 = time.perf_counter()
        info = log.read(offset, 1 << 20, offset + 16, True)
        total = sum(len(b) for b in info.buffers)
        spent += time.perf_counter() - t0
        assert total == len(buf)
    engine.close()
    return spent


def _closed_reads(data_dir: str, n: int) -> float:
    engine = SegmentStorageEngine(data_dir, {})
    log = engine.open_log(TP, LogConfig())
    end = log.log_end_offset
    t0 = time.perf_counter()
    offset = 0
    for _ in range(n):
        info = log.read(offset, 1 << 20, end, True)
        offset = info.first_offset + 1 if offset + 1_024 >= end else offset + 1_024
        if offset >= end - 1_100:
            offset = 0
    elapsed = time.perf_counter() - t0
    engine.close()
    return elapsed


def main() -> None:
    root = tempfile.mkdtemp(prefix="pydmq-bench-", dir=sys.argv[1] if len(sys.argv) > 1 else None)
    try:
        n = 20_000
        for flush in (2**63 - 1, 1):
            count = n if flush > 1 else 2_000
            d = os.path.join(root, f"append-{flush}")
            elapsed, total = _append(d, count, flush)
            mb = count * len(make_batch(0, 16, value_size=1_000)) / 1e6
            label = "page cache" if flush > 1 else "fsync every batch"
            print(
                f"append 16 KB batches ({label}): {count / elapsed:,.0f}/s, {mb / elapsed:,.0f} MB/s;"
                f" with the final flush: {count / total:,.0f}/s"
            )
        d = os.path.join(root, f"append-{2**63 - 1}")
        print(
            f"1 MB reads of closed segments (mmap views): {2_000 / _closed_reads(d, 2_000):,.0f}/s"
        )
        for mode in ("pread", "mmap"):
            d = os.path.join(root, f"tail-{mode}")
            spent = _tail_reads(d, mode, 5_000)
            print(f"tail read of the newest 16 KB batch ({mode}): {spent / 5_000 * 1e6:.1f} us")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
