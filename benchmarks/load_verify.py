"""What checking stored data costs: open with and without a CRC32C pass, first read vs later.

Writes ``--gib`` GiB of 16 KiB batches (1 KiB records) into one partition of a segment engine
in a temporary directory (1 GiB segments, as the default ``log.segment.bytes``), closes it
cleanly, then prints:

* the open of a single-node log (``LogConfig.replicated`` False: segments below the recovery
  point are trusted after cheap structural checks, no full read);
* the open of a follower's log (``replicated`` True: every segment is scanned, framing and
  CRC32C of every batch), the pass a cluster follower pays at start-up so that it finds damage
  its leader can repair;
* reading the whole log once after a single-node open (each byte is checked on this first
  read) and once more (nothing left to check).

The page cache is warm (the data was just written): a cold start adds the disk's read time to
the scan. Figures are printed, never asserted.

    python benchmarks/load_verify.py --gib 10
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

from pydmq.engines.segment import SegmentStorageEngine
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig, TopicPartition

TP = TopicPartition("verify", 0)
RECORD = 1024
PER_BATCH = 16
CHUNK = 64  # batches per append call


def write(data_dir: str, gib: float) -> int:
    engine = SegmentStorageEngine(data_dir)
    log = engine.open_log(TP, LogConfig())
    value = bytes(RECORD)
    total = int(gib * (1 << 30))
    written = 0
    while written < total:
        base = log.log_end_offset
        batches = [
            build_batch(
                [SimpleRecord(None, value, (), 0) for _ in range(PER_BATCH)],
                base_offset=base + i * PER_BATCH,
            )
            for i in range(CHUNK)
        ]
        data = b"".join(batches)
        log.append(data, list(iter_batch_headers(data)))
        written += len(data)
    engine.close()
    return written


def open_log(data_dir: str, replicated: bool) -> tuple[float, int]:
    started = time.perf_counter()
    engine = SegmentStorageEngine(data_dir)
    log = engine.open_log(TP, LogConfig(replicated=replicated))
    elapsed = time.perf_counter() - started
    end = log.log_end_offset
    engine.close()
    return elapsed, end


def read_all(data_dir: str) -> tuple[float, float]:
    engine = SegmentStorageEngine(data_dir)
    log = engine.open_log(TP, LogConfig())
    batch_size = next(iter_batch_headers(b"".join(log.read(0, 1, 1 << 62, True).buffers))).size
    times = []
    for _ in range(2):
        started = time.perf_counter()
        offset = 0
        while offset < log.log_end_offset:
            info = log.read(offset, 1 << 20, log.log_end_offset, True)
            offset += info.size // batch_size * PER_BATCH  # every batch is the same size
            del info
        times.append(time.perf_counter() - started)
    engine.close()
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="pydmq-verify-")
    try:
        started = time.perf_counter()
        size = write(data_dir, args.gib)
        print(f"wrote {size / (1 << 30):.2f} GiB in {time.perf_counter() - started:.1f} s")
        for replicated in (False, True, False):
            elapsed, end = open_log(data_dir, replicated)
            kind = "follower (CRC32C pass)" if replicated else "single node (no full read)"
            print(
                f"open, {kind}: {elapsed:.3f} s ({size / (1 << 20) / elapsed:,.0f} MiB/s), "
                f"log end {end:,}"
            )
        first, second = read_all(data_dir)
        print(
            f"read everything after a single-node open: first read {first:.2f} s "
            f"({size / (1 << 20) / first:,.0f} MiB/s, checks each byte), second "
            f"{second:.2f} s ({size / (1 << 20) / second:,.0f} MiB/s)"
        )
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
