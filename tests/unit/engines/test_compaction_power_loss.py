"""A crash (and a power loss) at every step of a compaction swap in the segment engine.

A child process fills a log of several closed segments with updates of a few keys, flushes
it, and runs one cleaning (one group of segments) with a failpoint armed at a step of the
swap (:mod:`pydmq.engines.segment.compaction`); it dies there. Then, for every power-loss
variant of :func:`~crash_support.apply_power_loss` (and the crashed tree as it is), the log
reopens and holds exactly the records before the cleaning or exactly those after it: never
neither, never both, no swap leftover, every flushed offset still the log end; and it accepts
appends that survive a clean reopen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crash_support import (
    COMPACTION_POINTS,
    LMDB_MODES,
    NAME_MODES,
    TAIL_MODES,
    apply_power_loss,
    tracker_prelude,
)

from pydmq.engines.segment.engine import SegmentStorageEngine
from pydmq.failpoints import CRASH_EXIT_CODE, ENV_VAR
from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
from pydmq.storage.api import LogConfig, TopicPartition
from pydmq.testing.conformance_compaction import read_all_records

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the tracker needs /proc"),
]

TP = TopicPartition("crash", 0)
CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, retention_ms=-1)

# The workload and the cleaning, shared by the child and the reference run in this process.
WORKLOAD = textwrap.dedent(
    """
    from pydmq.engines.segment.engine import SegmentStorageEngine
    from pydmq.protocol.records import SimpleRecord, build_batch, iter_batch_headers
    from pydmq.storage.api import LogConfig, TopicPartition
    from pydmq.testing.conformance_compaction import run_cleaning

    def fill_and_clean(data_dir, report=print):
        engine = SegmentStorageEngine(data_dir, {"index.flush.ms": "0"})
        log = engine.open_log(
            TopicPartition("crash", 0),
            LogConfig(segment_bytes=2048, index_interval_bytes=256, retention_ms=-1),
        )
        for i in range(120):
            base = log.log_end_offset
            batch = build_batch(
                [SimpleRecord(b"k%d" % ((base + j) % 5), b"v%d" % (base + j), (),
                              1_700_000_000_000 + base + j) for j in range(2)],
                base_offset=base,
            )
            log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
        report("flushed", log.log_end_offset, flush=True)
        result = run_cleaning(log, 1_700_000_000_000, segment_bytes=1 << 30)
        report("cleaned", result.groups_swapped, flush=True)
        return engine, log
    """
)

CHILD = WORKLOAD + textwrap.dedent(
    """
    import sys
    fill_and_clean(sys.argv[1])
    print("finished", flush=True)
    """
)

# point -> action: each crash comes in the middle of the one swap of the cleaning.
CASES = {
    "cleaner.cleaned.fsync": "crash",
    "cleaner.swap.before_rename": "crash",
    "cleaner.swap.renamed": "crash",
    "cleaner.swap.index_dropped": "crash",
    "cleaner.swap.delete.segment": "crash-after=2",
    "cleaner.swap.after_rename": "crash",
    "cleaner.swap.done": "crash",
}


def test_every_compaction_failpoint_has_a_case() -> None:
    assert set(CASES) == COMPACTION_POINTS


Rows = list[tuple[int, bytes | None, bytes | None]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Rows, Rows, int]:
    """(records before the cleaning, records after it, the flushed log end)."""
    namespace: dict[str, object] = {}
    exec(WORKLOAD, namespace)  # our own code, shared with the child
    seen: dict[str, int] = {}

    def report(word: str, value: int, flush: bool = False) -> None:
        seen[word] = value

    fill_and_clean = namespace["fill_and_clean"]
    engine, log = fill_and_clean(str(tmp_path_factory.mktemp("reference")), report)  # type: ignore[operator]
    after = read_all_records(log)
    engine.close()
    assert seen["cleaned"] == 1, "the workload must clean exactly one group"
    end = seen["flushed"]
    before: Rows = [(o, b"k%d" % (o % 5), b"v%d" % o) for o in range(end)]
    assert len(after) < len(before)
    return before, after, end


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """One child run per point (lazily): (crashed root, tracker side directory)."""

    class Runs(dict[str, tuple[Path, Path]]):
        def __missing__(self, point: str) -> tuple[Path, Path]:
            base = tmp_path_factory.mktemp(point)
            root, side = base / "disk", base / "side"
            env = {**os.environ, ENV_VAR: f"{point}={CASES[point]}"}
            proc = subprocess.run(
                [sys.executable, "-c", tracker_prelude(root, side) + CHILD, str(root / "data")],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert proc.returncode == CRASH_EXIT_CODE, (point, proc.stdout, proc.stderr)
            assert f"failpoint {point}" in proc.stderr
            assert "cleaned" not in proc.stdout and "flushed" in proc.stdout
            self[point] = (root, side)
            return self[point]

    return Runs()


def check_cleaned_or_not(data_dir: Path, before: Rows, after: Rows, end: int) -> Rows:
    """Reopen: the records are exactly ``before`` or ``after``; nothing of the swap is left;
    appends work and survive a clean reopen. Returns the records found."""
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, CONFIG)
        rows = read_all_records(log)
        assert rows in (before, after), f"neither the old nor the new segments: {rows}"
        assert log.log_end_offset == end
        leftovers = [
            n for n in os.listdir(data_dir / "crash-0") if n.endswith((".swap", ".cleaned"))
        ]
        assert not leftovers
        batch = build_batch([SimpleRecord(b"new", b"x", (), 1_700_000_000_000)], base_offset=end)
        log.append(batch, list(iter_batch_headers(batch)))
        log.flush()
    finally:
        engine.close()
    engine = SegmentStorageEngine(str(data_dir))
    try:
        log = engine.open_log(TP, CONFIG)
        assert log.recovered_segments == 0, "a clean close needed recovery"
        assert read_all_records(log) == [*rows, (end, b"new", b"x")]
    finally:
        engine.close()
    return rows


@pytest.mark.parametrize("point", sorted(CASES))
def test_crash_at_a_swap_step_leaves_old_or_new(
    crashed: dict[str, tuple[Path, Path]],
    reference: tuple[Rows, Rows, int],
    tmp_path: Path,
    point: str,
) -> None:
    """The crashed tree as the process left it (the page cache survives a kill -9)."""
    root, _ = crashed[point]
    data = tmp_path / "data"
    subprocess.run(["cp", "-a", str(root / "data"), str(data)], check=True)
    rows = check_cleaned_or_not(data, *reference)
    before, after, _ = reference
    # Once the .swap name is durable the swap completes; before it, nothing changed.
    completes = point not in ("cleaner.cleaned.fsync", "cleaner.swap.before_rename")
    assert rows == (after if completes else before)


@pytest.mark.parametrize("names", NAME_MODES)
@pytest.mark.parametrize("lmdb", LMDB_MODES)
@pytest.mark.parametrize("tail", TAIL_MODES)
@pytest.mark.parametrize("point", sorted(CASES))
def test_power_loss_at_a_swap_step_leaves_old_or_new(
    crashed: dict[str, tuple[Path, Path]],
    reference: tuple[Rows, Rows, int],
    tmp_path: Path,
    point: str,
    tail: str,
    lmdb: str,
    names: str,
) -> None:
    root, side = crashed[point]
    after = tmp_path / "after"
    apply_power_loss(root, side, after, tail=tail, lmdb=lmdb, names=names)
    check_cleaned_or_not(after / "data", *reference)
