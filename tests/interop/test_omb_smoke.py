"""The OpenMessaging-style benchmark end to end: the ``smoke`` set against one pydmq node
with the librdkafka driver, one second per timed mode, every mode; every result line must
be a success with positive figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 90  # typically ~15 s; bounded even on a loaded machine
THROUGHPUT = ("records", "records_per_s", "mb_per_s", "seconds")
LATENCY = ("latency_p50_ms", "latency_p99_ms", "latency_p999_ms", "latency_max_ms")


def run_smoke(tmp_path: Path) -> tuple[list[dict[str, Any]], str]:
    out = tmp_path / "results.jsonl"
    cmd = [
        sys.executable, "-m", "benchmarks.omb",
        "--targets", "pydmq",
        "--set", "smoke",
        "--driver", "librdkafka",
        "--duration", "1",
        "--warmup", "1",
        "--e2e-rate", "5000",
        "--backlog-bytes", "2000000",
        "--out", str(out),
        "--workdir", str(tmp_path / "work"),
    ]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    lines = [json.loads(text) for text in out.read_text().splitlines() if text.strip()]
    return lines, output


def test_smoke_set_on_one_pydmq_node(tmp_path: Path) -> None:
    lines, output = run_smoke(tmp_path)
    modes = {line["mode"] for line in lines}
    assert modes == {"ceiling", "produce", "consume", "latency", "e2e", "backlog"}, output
    for line in lines:
        where = f"{line['target']} {line['mode']}: {line}"
        assert line["status"] == "ok", where
        figures = line["figures"]
        for name in THROUGHPUT:
            assert figures[name] > 0, where
        if line["mode"] in ("produce", "latency", "e2e"):
            for name in LATENCY:
                assert figures[name] > 0, where
        if line["target"] == "pydmq":
            assert line["nodes"] == 1 and line["target_version"], where
            assert figures["broker_rss_max_mb"] > 0 and figures["broker_cpu_s"] >= 0, where
        assert line["machine"]["nproc"] >= 1 and line["git_commit"], where
    consumed = next(line for line in lines if line["mode"] == "consume")["figures"]
    assert consumed["records"] == consumed["written"]  # every acknowledged record read back


def test_fetch_size_probe_reads_everything_at_each_size() -> None:
    """``benchmarks.omb.fetch_size`` on one pydmq node, small: every round reads every record,
    and the smaller per-partition limit needs more Fetch requests."""
    cmd = [
        sys.executable, "-m", "benchmarks.omb.fetch_size",
        "--targets", "pydmq",
        "--records", "40000",
        "--partition-bytes", "1048576,16384",
        "--rounds", "1",
    ]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rounds = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["partition_bytes"] for r in rounds] == [1048576, 16384]
    for r in rounds:
        assert r["records"] == 40000 and r["records_per_s"] > 0 and r["received_mb"] > 4, r
    assert rounds[1]["fetches"] > rounds[0]["fetches"], rounds
