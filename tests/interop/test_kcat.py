"""kcat (Debian package; librdkafka underneath) against a pydmq broker process.

kcat has no admin API, so topics are auto-created by Metadata with the broker's
num.partitions=3 (set by the broker fixture). kcat cannot set per-record timestamps, so
timestamp checks use the CreateTime stamps the producer chose, read back with %T.
"""

from __future__ import annotations

import shutil
import time

import pytest

from .support import BIG_COUNT, CODEC_COUNT, CODECS, PARTITIONS, key, run_cmd, unique_topic, value

pytestmark = pytest.mark.interop

FMT = "%p|%o|%T|%k|%s|%h\\n"


@pytest.fixture(scope="module", autouse=True)
def _kcat() -> None:
    if shutil.which("kcat") is None:
        pytest.fail("kcat not on PATH: run ./scripts/test (installs Debian's kcat)")


def kcat_produce(bootstrap: str, topic: str, partition: int, indices: range, codec: str) -> None:
    lines = b"".join(key(i) + b":" + value(i) + b"\n" for i in indices)
    run_cmd(
        [
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-K:",
            "-z",
            codec,
            "-H",
            f"codec={codec}",
            "-H",
            f"part={partition}",
            "-H",
            "empty=",
        ],
        input=lines,
        timeout=180,
    )


def produce_all(bootstrap: str, topic: str, count: int, codec: str) -> tuple[int, int]:
    """Each partition p gets indices p, p+3, ... from one kcat run. Returns the wall-clock
    window (ms) in which CreateTime stamps must fall."""
    t0 = int(time.time() * 1000)
    for p in range(PARTITIONS):
        kcat_produce(bootstrap, topic, p, range(p, count, PARTITIONS), codec)
    return t0 - 1, int(time.time() * 1000) + 1


def kcat_consume(bootstrap: str, topic: str, *args: str) -> list[tuple]:
    proc = run_cmd(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", FMT, *args], timeout=180
    )
    rows = []
    for line in proc.stdout.decode().splitlines():
        if not line:
            continue
        p, o, ts, k, v, h = line.split("|", 5)
        rows.append((int(p), int(o), int(ts), k, v, h))
    return rows


def check_rows(rows, count: int, codec: str, window: tuple[int, int]) -> dict[int, list]:
    by_part: dict[int, list] = {}
    for r in rows:
        by_part.setdefault(r[0], []).append(r)
    assert set(by_part) == set(range(PARTITIONS))
    for p, prow in by_part.items():
        idx = list(range(p, count, PARTITIONS))
        assert len(prow) == len(idx), f"partition {p}: {len(prow)} records, want {len(idx)}"
        for pos, (i, (_, o, ts, k, v, h)) in enumerate(zip(idx, prow, strict=True)):
            assert o == pos, f"partition {p}: offset {o} at position {pos}"
            assert k == key(i).decode(), (p, o, k)
            assert v == value(i).decode(), (p, o, v)
            assert h == f"codec={codec},part={p},empty=", (p, o, h)
            assert window[0] <= ts <= window[1], (p, o, ts, window)
        tss = [r[2] for r in prow]
        assert tss == sorted(tss), f"partition {p}: CreateTime not monotonic for one producer"
    return by_part


def topic_partitions(bootstrap: str, topic: str) -> int:
    out = run_cmd(["kcat", "-L", "-b", bootstrap, "-t", topic], timeout=60).stdout.decode()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith(f'topic "{topic}" with'):
            return int(line.split()[3])
    raise AssertionError(out)


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_per_codec(broker, codec: str) -> None:
    topic = unique_topic(f"kcat-{codec}")
    window = produce_all(broker.bootstrap, topic, CODEC_COUNT, codec)
    assert topic_partitions(broker.bootstrap, topic) == PARTITIONS
    rows = kcat_consume(broker.bootstrap, topic, "-o", "beginning")
    check_rows(rows, CODEC_COUNT, codec, window)


def test_roundtrip_100k(broker) -> None:
    topic = unique_topic("kcat-big")
    window = produce_all(broker.bootstrap, topic, BIG_COUNT, "snappy")
    rows = kcat_consume(broker.bootstrap, topic, "-o", "beginning")
    check_rows(rows, BIG_COUNT, "snappy", window)


@pytest.fixture(scope="module")
def filled(broker):
    topic = unique_topic("kcat-filled")
    window = produce_all(broker.bootstrap, topic, CODEC_COUNT, "lz4")
    rows = kcat_consume(broker.bootstrap, topic, "-o", "beginning")
    return topic, check_rows(rows, CODEC_COUNT, "lz4", window)


def test_offset_by_timestamp(broker, filled) -> None:
    """-o s@TS starts at the first offset whose timestamp >= TS (ties included)."""
    topic, by_part = filled
    for p, prow in by_part.items():
        tss = [r[2] for r in prow]
        for pos in (1, len(prow) // 3, len(prow) // 2, len(prow) - 1):
            for target in (tss[pos], tss[pos] - 1, tss[pos] + 1):
                expected = next((k for k, t in enumerate(tss) if t >= target), None)
                if expected is None:
                    continue
                got = kcat_consume(
                    broker.bootstrap, topic, "-p", str(p), "-o", f"s@{target}", "-c", "1"
                )
                assert got and got[0][1] == expected, (p, target, got[:1], expected)


def test_seek_into_batch(broker, filled) -> None:
    topic, by_part = filled
    for p, prow in by_part.items():
        pos = len(prow) // 2 + 1
        got = kcat_consume(broker.bootstrap, topic, "-p", str(p), "-o", str(pos), "-c", "3")
        assert [r[1] for r in got] == [pos, pos + 1, pos + 2]
        assert [r[3:] for r in got] == [r[3:] for r in prow[pos : pos + 3]]


# -- transactions (kcat's -X transactional.id: one transaction per run, committed at the end
# of input). kcat's abort on SIGINT is not tested: with input on a pipe, kcat 1.7.1 sends
# nothing before end of input and does not exit on SIGINT, against Kafka 4.4 as against
# pydmq (tried 2026-11-27), so it cannot abort a transaction that holds records.


def kcat_values(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, str]]:
    """(offset, value) of partition 0 as a reader with ``isolation`` sees it."""
    proc = run_cmd(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o|%s\\n",
            "-X",
            f"isolation.level={isolation}",
        ],
        timeout=120,
    )
    rows = []
    for line in proc.stdout.decode().splitlines():
        if line:
            offset, val = line.split("|", 1)
            rows.append((int(offset), val))
    return rows


def kcat_produce_lines(bootstrap: str, topic: str, lines: list[str], *extra: str) -> None:
    run_cmd(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", *extra],
        input="".join(f"{line}\n" for line in lines).encode(),
        timeout=120,
    )


def test_transaction_committed_at_end_of_input(broker) -> None:
    topic = unique_topic("kcat-txn-commit")
    kcat_produce_lines(broker.bootstrap, topic, ["before"])
    txn = [f"txn-{i}" for i in range(50)]
    kcat_produce_lines(
        broker.bootstrap, topic, txn, "-X", f"transactional.id={unique_topic('kcat-tid')}"
    )
    kcat_produce_lines(broker.bootstrap, topic, ["after"])
    committed = kcat_values(broker.bootstrap, topic, "read_committed")
    # 0: before, 1..50: the transaction, 51: its commit marker (never delivered), 52: after
    assert committed == [(0, "before"), *((1 + i, v) for i, v in enumerate(txn)), (52, "after")]
    assert kcat_values(broker.bootstrap, topic, "read_uncommitted") == committed
