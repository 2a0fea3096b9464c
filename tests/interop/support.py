"""Shared helpers for the interop tests: deterministic records and their checks.

Every client test produces records whose content is a pure function of the record index
``i`` and a base timestamp, so the reading side can verify every byte. The Java driver
(compat/java/src/InteropClient.java) implements the same functions; keep them in step.

    partition = i % partitions
    key       = b"key-<i>"
    value     = b"value-<i>-" + b"abcdefghij" * (i % 7)
    headers   = [("idx", b"<i>"), ("bin", bytes([i & 0xff, (i >> 8) & 0xff, 0]))]
    timestamp = base_ts + i                  (CreateTime, strictly increasing)

A fresh topic therefore holds indices p, p+P, p+2P, ... at offsets 0, 1, 2, ... of
partition p, which is what :func:`check_partition_log` asserts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO_ROOT / "compat" / "java"

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3

# Records per codec in the parametrized tests, and in the one big test per client.
CODEC_COUNT = int(os.environ.get("PYDMQ_INTEROP_CODEC_COUNT", "20000"))
BIG_COUNT = int(os.environ.get("PYDMQ_INTEROP_BIG_COUNT", "100000"))


def key(i: int) -> bytes:
    return b"key-%d" % i


def value(i: int) -> bytes:
    return b"value-%d-" % i + b"abcdefghij" * (i % 7)


def headers(i: int) -> list[tuple[str, bytes]]:
    return [("idx", b"%d" % i), ("bin", bytes([i & 0xFF, (i >> 8) & 0xFF, 0]))]


def timestamp(base_ts: int, i: int) -> int:
    return base_ts + i


def partition_of(i: int, partitions: int = PARTITIONS) -> int:
    return i % partitions


def index_at(partition: int, position: int, partitions: int = PARTITIONS) -> int:
    """Index of the record at ``position`` (0-based) of ``partition`` in a fresh topic."""
    return partition + position * partitions


def count_in_partition(partition: int, count: int, partitions: int = PARTITIONS) -> int:
    return len(range(partition, count, partitions))


def new_base_ts() -> int:
    """A base timestamp an hour in the past: well inside every retention and
    ``log.message.timestamp.*`` window, and distinct per call."""
    return int(time.time() * 1000) - 3_600_000


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Rec:
    """A record as read back by a client, normalised."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def check_record(rec: Rec, i: int, base_ts: int) -> None:
    where = f"partition {rec.partition} offset {rec.offset} (index {i})"
    assert rec.key == key(i), f"key at {where}: {rec.key!r}"
    assert rec.value == value(i), f"value at {where}: {rec.value!r}"
    assert list(rec.headers) == headers(i), f"headers at {where}: {rec.headers!r}"
    assert rec.timestamp == timestamp(base_ts, i), f"timestamp at {where}: {rec.timestamp}"


def group_by_partition(recs: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    return out


def index_of(rec: Rec) -> int:
    assert rec.key is not None and rec.key.startswith(b"key-"), rec
    return int(rec.key[4:])


def check_partition_log(
    recs: Sequence[Rec],
    partition: int,
    count: int,
    base_ts: int,
    *,
    first_position: int = 0,
    partitions: int = PARTITIONS,
    producer_ordered: bool = True,
) -> None:
    """``recs`` are one partition's records in the order the client delivered them.

    They must start at offset ``first_position`` and have contiguous offsets (i.e. the
    consumer delivers them in log order), and hold the records of indices
    ``partition + k * partitions`` for k from ``first_position`` on, byte for byte.

    ``producer_ordered=False`` is for producers that may legitimately reorder on retry
    (non-idempotent with several requests in flight, e.g. librdkafka's defaults): then
    each record is checked against the index its key names, and the indices must be
    exactly the expected set.
    """
    expected_n = count_in_partition(partition, count, partitions) - first_position
    assert len(recs) == expected_n, (
        f"partition {partition}: got {len(recs)} records, expected {expected_n}"
    )
    for k, rec in enumerate(recs):
        pos = first_position + k
        assert rec.partition == partition
        assert rec.offset == pos, f"partition {partition}: offset {rec.offset} at position {pos}"
        i = index_at(partition, pos, partitions) if producer_ordered else index_of(rec)
        check_record(rec, i, base_ts)
    if not producer_ordered:
        got = sorted(index_of(r) for r in recs)
        want = [index_at(partition, first_position + k, partitions) for k in range(expected_n)]
        assert got == want, f"partition {partition}: wrong set of records"


def check_topic(
    recs: Iterable[Rec],
    count: int,
    base_ts: int,
    partitions: int = PARTITIONS,
    *,
    producer_ordered: bool = True,
) -> None:
    by_part = group_by_partition(recs)
    assert set(by_part) <= set(range(partitions)), sorted(by_part)
    for p in range(partitions):
        check_partition_log(
            by_part.get(p, []),
            p,
            count,
            base_ts,
            partitions=partitions,
            producer_ordered=producer_ordered,
        )


def timestamp_queries(count: int, base_ts: int, partitions: int = PARTITIONS):
    """(partition, target timestamp, expected offset or None) for ListOffsets by time.

    Timestamps in partition p are base+p, base+p+P, ... so
      * target == ts of a record -> that record's offset (exact hit),
      * target == ts - 1         -> still that record: first ts >= target (between records),
      * target before everything -> offset 0,
      * target after everything  -> no offset (None; Kafka answers -1).
    Positions are chosen in the middle of the log, which with any sane batching lands
    inside a multi-record batch.
    """
    qs = []
    for p in range(partitions):
        n = count_in_partition(p, count, partitions)
        for pos in sorted({1, n // 3, n // 2 + 1, n - 2}):
            if not 0 <= pos < n:
                continue
            ts = timestamp(base_ts, index_at(p, pos, partitions))
            qs.append((p, ts, pos))
            qs.append((p, ts - 1, pos))
        qs.append((p, base_ts - 10_000, 0))
        qs.append((p, base_ts + count + 10_000, None))
    return qs


# --------------------------------------------------------------------------- processes


def java_classpath() -> str:
    return f"{JAVA_DIR / 'target'}{os.pathsep}{JAVA_DIR / 'lib'}{os.sep}*"


def java_ready() -> str | None:
    """None when the Java driver is built, else the reason it is not."""
    if shutil.which("java") is None:
        return "java not on PATH"
    if not (JAVA_DIR / "target" / "InteropClient.class").exists():
        return "compat/java/target/InteropClient.class missing: run ./scripts/test"
    if not list((JAVA_DIR / "lib").glob("kafka-clients-*.jar")):
        return "compat/java/lib has no kafka-clients jar: run ./scripts/test"
    return None


def run_java(args: Sequence[str], timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``InteropClient`` with ``args``; raise with its stderr tail when it fails."""
    reason = java_ready()
    if reason:
        raise RuntimeError(reason)
    cmd = [
        "java",
        "-Xss1m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        java_classpath(),
        "InteropClient",
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"InteropClient {' '.join(args)} exited {proc.returncode}\n"
            f"--- stderr (tail) ---\n{proc.stderr[-4000:]}\n"
            f"--- stdout (tail) ---\n{proc.stdout[-2000:]}"
        )
    return proc


KAFKA_DIST = REPO_ROOT / "compat" / "kafka" / "dist"


def kafka_configs_unavailable() -> str | None:
    """None when Kafka's ``kafka-configs`` (ConfigCommand) can run, else why not."""
    if shutil.which("java") is None:
        return "java is not on PATH (kafka-configs is Kafka's Java tool)"
    if not list(KAFKA_DIST.glob("kafka-tools-*.jar")):
        return "compat/kafka/dist has no kafka-tools jar (scripts/test installs it)"
    return None


def kafka_configs(bootstrap: str, *args: str) -> str:
    """Kafka 4.4's ``kafka-configs`` (ConfigCommand from compat/kafka/dist, unchanged) against
    ``bootstrap``: its stdout; raises with its output when it exits non-zero."""
    command = [
        "java",
        "-cp",
        f"{KAFKA_DIST}/*",
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def run_cmd(
    cmd: Sequence[str], *, input: bytes | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(
        list(cmd),
        input=input,
        capture_output=True,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\n"
            f"--- stderr (tail) ---\n{proc.stderr[-4000:].decode(errors='replace')}"
        )
    return proc
