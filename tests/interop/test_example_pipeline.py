"""The example data pipeline (examples/pipeline/run.py) end to end, in its --short CI size.

Runs the documented command as a subprocess: it starts its own ``pydmq serve`` on a free
port, generates events with confluent-kafka, runs the PySpark structured-streaming job
(Kafka source -> event-time windowed counts -> Kafka sink + Parquet) and reads the results
back with a consumer. The script compares every window's count with what the generator
produced; this test checks its exit status, its ``SUMMARY`` line and the Parquet files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import spark_support as ss
from .support import REPO_ROOT

pytestmark = pytest.mark.interop

SCRIPT = REPO_ROOT / "examples" / "pipeline" / "run.py"
# Typically 40-60 s on 2 cores (about half of it JVM start-up and the first micro-batch).
TIMEOUT_S = 180


def test_example_pipeline_short(tmp_path: Path) -> None:
    ss.check_versions()
    jars = ss.connector_jars()  # resolves compat/spark/jars with Maven if missing
    work = tmp_path / "work"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--short", "--work-dir", str(work)],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "PYDMQ_SPARK_JARS": str(Path(jars[0]).parent),
        },
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    elapsed = time.monotonic() - started
    output = proc.stdout + "\n--- stderr ---\n" + proc.stderr[-6000:]
    assert proc.returncode == 0, f"pipeline failed (exit {proc.returncode}):\n{output}"

    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("SUMMARY ")]
    assert len(lines) == 1, output
    summary = json.loads(lines[0].removeprefix("SUMMARY "))
    assert summary["ok"] is True, output
    assert summary["events"] == 3000
    # Every event is counted exactly once, in the topic and in Parquet.
    assert summary["kafka_total"] == summary["events"], output
    assert summary["parquet_total"] == summary["events"], output
    assert summary["kafka_windows"] == summary["expected_windows"] > 0, output
    assert summary["parquet_windows"] == summary["expected_windows"], output
    assert "MISMATCH" not in proc.stdout

    # The printed table ends with the per-page totals, which add up to the events.
    total_line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("all windows"))
    counts = [int(x) for x in total_line.split()[2:]]
    assert sum(counts[:-1]) == counts[-1] == summary["events"], total_line

    # Parquet files are where the summary says, and the run cleaned up after itself.
    parquet_dir = Path(summary["parquet_dir"])
    assert parquet_dir == work / "page-counts.parquet"
    files = sorted(parquet_dir.glob("batch_id=*/part-*.parquet"))
    assert files, f"no Parquet files under {parquet_dir}"
    assert all(f.stat().st_size > 0 for f in files)
    assert (work / "checkpoint" / "offsets").is_dir()
    assert not (work / "broker-data").exists(), "the broker's data dir was not removed"
    print(f"example pipeline (--short): {elapsed:.1f} s")
