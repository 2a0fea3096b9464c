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
(unsynced data, unsynced directory entries) is simulated by ``test_power_loss.py``, which runs
the same child and checks under a model of what a power loss at each point may leave. The
child and the checks live in ``crash_support.py``.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from crash_support import (
    CASES,
    COMPACTION_POINTS,
    NOT_SEGMENT_ENGINE,
    check_log,
    promised_end,
    run_child,
)

from pydmq.failpoints import (
    CRASH_EXIT_CODE,
    ENV_VAR,
    FILE_ENV_VAR,
    POINTS,
    SHORT,
    Fault,
    make_failpoint,
    parse_faults,
    parse_spec,
)

pytestmark = pytest.mark.timeout(60)


def test_every_failpoint_has_a_case() -> None:
    assert set(CASES) == POINTS - NOT_SEGMENT_ENGINE - COMPACTION_POINTS


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


def test_error_actions_parse_and_count_hits() -> None:
    faults = parse_faults(
        "segment.fsync=eio-after=2-times=2, segment.append.write=short,index.commit=enospc"
    )
    assert faults["segment.fsync"] == Fault("eio", 2, 2)
    assert faults["segment.append.write"] == Fault("short", 1, 0)
    for bad in ("segment.fsync=short", "segment.fsync=crash-times=2", "index.commit=eio-times=0"):
        with pytest.raises(ValueError):
            parse_faults(bad)
    fp = make_failpoint("segment.fsync=eio-after=2-times=2,segment.append.write=short")
    outcomes = []
    for _ in range(5):
        try:
            fp("segment.fsync")
            outcomes.append("ok")
        except OSError as exc:
            outcomes.append(errno.errorcode[exc.errno or 0])
    assert outcomes == ["ok", "EIO", "EIO", "ok", "ok"]
    assert fp("segment.append.write") is SHORT
    assert fp("index.commit") is None


def test_the_failpoint_file_is_reread_on_reload(tmp_path: Path) -> None:
    """A process started with ``PYDMQ_FAILPOINTS_FILE`` arms what the file says when
    ``reload()`` runs (``pydmq serve`` calls it on SIGUSR2)."""
    spec = tmp_path / "failpoints"
    child = textwrap.dedent(
        f"""
        import pathlib
        from pydmq import failpoints
        failpoints.failpoint("segment.fsync")  # no file yet: nothing armed
        pathlib.Path({str(spec)!r}).write_text("segment.fsync=eio\\n")
        failpoints.failpoint("segment.fsync")  # armed only by the reload
        assert failpoints.reload()
        try:
            failpoints.failpoint("segment.fsync")
        except OSError as exc:
            print("raised", exc.errno)
        """
    )
    env = {**os.environ, FILE_ENV_VAR: str(spec)}
    env.pop(ENV_VAR, None)
    out = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["raised", str(errno.EIO)]
