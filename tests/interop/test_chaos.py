"""The short chaos pass CI runs: ``pydmq chaos`` with a fixed seed, every fault kind
(process faults and, as root, storage faults: full disks, EIO on write and fsync, a damaged
replica segment).

It runs the real command in a child process (3 node processes behind the proxy, 3 idempotent
acks=all producers, a reader, a 2-member group, a 2-member share group) and fails on any
anomaly the checkers report: lost, moved, duplicated, reordered or inconsistent acknowledged
writes, reads of truncated data, consumer skips, committed-offset regressions, replicas that
differ offline; a record the share group accepted twice, handed out again after its
acceptance, or never handed out. The longer
documented run (docs/RELIABILITY.md) is the same command with a longer ``--duration``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("confluent_kafka")

from pydmq.chaos.checker import ANOMALY_NAMES
from pydmq.chaos.faults import FAULT_KINDS, PROCESS_FAULT_KINDS
from pydmq.chaos.share_checker import SHARE_ANOMALY_NAMES
from pydmq.chaos.storage import storage_faults_unavailable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

SEED = 20261126
# 12 kinds (8 process, 4 storage) at about 6 s a fault: the first round needs ~75 s.
DURATION = 90
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "chaos"


def test_short_chaos_pass_loses_nothing(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    data_dir = tmp_path / "run"
    output = ARTIFACTS / "short-pass.log"
    with output.open("wb") as out:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pydmq",
                "chaos",
                "--duration",
                str(DURATION),
                "--seed",
                str(SEED),
                "--data-dir",
                str(data_dir),
                "--json-out",
                str(ARTIFACTS / "short-pass.json"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=540,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    text = output.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("{"), f"no JSON report; output tail:\n{text[-4000:]}"
    report = json.loads(lines[-1])
    summary = "\n".join(lines[-60:-1])
    for name in ANOMALY_NAMES:
        assert report[name]["count"] == 0, f"{name}: {report[name]}\n{summary}"
    assert not report["run"]["harness_errors"], summary
    assert report["writes"]["acked"] > 1000, summary
    share = report["share"]  # the share group (KIP-932) reading every topic
    for name in SHARE_ANOMALY_NAMES:
        assert share[name]["count"] == 0, f"{name}: {share[name]}\n{summary}"
    assert share["finished"] and share["accepted"] > 1000, summary
    by_kind = report["faults"]["by_kind"]
    # Storage faults need a tmpfs per node (root, as CI runs); elsewhere the command leaves
    # them out and says so.
    expected = FAULT_KINDS if storage_faults_unavailable() is None else PROCESS_FAULT_KINDS
    assert set(by_kind) == set(expected), summary
    assert report["ok"] is True and proc.returncode == 0, summary


TXN_FAULTS = "kill_leader,kill_controller,pause_leader,isolate_leader"


def test_short_transactional_chaos_pass_is_clean(tmp_path: Path) -> None:
    """``pydmq chaos --workload transactions``: rounds of the transactional workload while
    coordinators and leaders are killed, paused and cut off; every round is checked for
    aborted reads, torn transactions, lost commits, duplicates across fenced epochs and reads
    past the LSO (the longer run: docs/RELIABILITY.md)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    output = ARTIFACTS / "short-txn-pass.log"
    with output.open("wb") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "pydmq", "chaos", "--workload", "transactions",
             "--duration", "20", "--seed", str(SEED), "--faults", TXN_FAULTS,
             "--round-inputs", "48", "--round-timeout", "30",
             "--data-dir", str(tmp_path / "run"),
             "--json-out", str(ARTIFACTS / "short-txn-pass.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=540,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    text = output.read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("%")]
    assert lines and lines[-1].startswith("{"), f"no JSON report; output tail:\n{text[-4000:]}"
    report = json.loads(lines[-1])
    summary = "\n".join(lines[-40:-1])
    assert not any(report["anomalies"].values()), f"{report['anomaly_examples']}\n{summary}"
    assert not report["harness_errors"], summary
    # warm-up, at least one round under faults, one after healing
    assert report["rounds_checked"] >= 3, summary
    assert report["transactions"]["committed"] > 0 and report["transactions"]["aborted"] > 0
    assert sum(report["faults"].values()) > 0 and set(report["faults"]) <= set(
        TXN_FAULTS.split(",")
    )
    assert report["ok"] is True and proc.returncode == 0, summary


SECURED_FAULTS = "kill_leader,kill_controller,pause_leader,isolate_leader"


def test_short_chaos_pass_on_a_secured_cluster_loses_nothing(tmp_path: Path) -> None:
    """``pydmq chaos --sasl``: every listener SASL_PLAINTEXT with ACLs on, the workload a user
    with only its ACLs; restarted and re-elected nodes must authenticate and authorize it
    (a node serving clients before it has the ACLs would show as client errors)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    output = ARTIFACTS / "short-sasl-pass.log"
    with output.open("wb") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "pydmq", "chaos", "--sasl", "--duration", "24",
             "--seed", str(SEED), "--faults", SECURED_FAULTS,
             "--data-dir", str(tmp_path / "run"),
             "--json-out", str(ARTIFACTS / "short-sasl-pass.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=400,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    text = output.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("{"), f"no JSON report; output tail:\n{text[-4000:]}"
    assert "SASL on every listener; the workload's 4 ACLs on every node" in text
    report = json.loads(lines[-1])
    summary = "\n".join(lines[-40:-1])
    for name in ANOMALY_NAMES:
        assert report[name]["count"] == 0, f"{name}: {report[name]}\n{summary}"
    assert not report["run"]["harness_errors"], summary
    assert report["writes"]["acked"] > 1000 and report["writes"]["failed"] == 0, summary
    assert set(report["faults"]["by_kind"]) <= set(SECURED_FAULTS.split(",")), summary
    assert report["faults"]["total"] >= 3, summary
    assert report["ok"] is True and proc.returncode == 0, summary
