"""kafka-python's own integration tests against pydmq (the CI subset).

compat/kafka-python/run.sh downloads kafka-python's sdist from PyPI (``pip download
--no-binary :all: --no-deps kafka-python==<version>``) into build/kafka-python/ (cached),
starts its own pydmq broker on a free loopback port and runs the sdist's
``test/integration`` tests listed in compat/kafka-python/tests.allow, unchanged, through the
adapter plugin compat/kafka-python/pydmq_shim.py. This test asserts that every
allow-listed test passes. The full run and its findings: compat/kafka-python/README.md and
FINDINGS.md.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "compat" / "kafka-python" / "run.sh"
ALLOW = ROOT / "compat" / "kafka-python" / "tests.allow"

# The allow-listed subset runs in well under a minute on 2 cores; the first run also
# downloads the sdist (~10 s). run.sh bounds each test with pytest-timeout.
TIMEOUT = float(os.environ.get("PYDMQ_KAFKA_PYTHON_SUITE_TIMEOUT", "240"))
FETCH_FAILED = 3  # run.sh's exit status when the sdist cannot be downloaded


def allowed() -> list[str]:
    ids = []
    for line in ALLOW.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert re.fullmatch(r"test/integration/test_\w+\.py::\S+", line), (
                f"bad tests.allow line: {line!r}"
            )
            ids.append(line)
    return ids


@pytest.mark.timeout(TIMEOUT + 120)
def test_kafka_python_allowed_subset() -> None:
    expected = allowed()
    assert expected, "tests.allow is empty"
    fetch = subprocess.run(
        ["bash", str(RUN), "--fetch-only"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    if fetch.returncode == FETCH_FAILED:
        pytest.skip(f"kafka-python sdist not downloadable (no network?): {fetch.stdout[-500:]}")
    assert fetch.returncode == 0, fetch.stdout

    proc = subprocess.run(
        ["bash", str(RUN), "--allowed"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )
    out = proc.stdout
    tail = "\n".join(out.splitlines()[-60:])
    verdicts = {
        nodeid: status
        for status, nodeid in re.findall(r"^(PASSED|FAILED|SKIPPED)\s+[\d.]+s\s+(\S+)", out, re.M)
    }
    missing = [t for t in expected if t not in verdicts]
    assert not missing, f"no verdict for {missing}:\n{tail}"
    not_passed = {t: verdicts[t] for t in expected if verdicts[t] != "PASSED"}
    assert not not_passed, f"allow-listed kafka-python tests did not pass: {not_passed}\n{tail}"
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{tail}"
    assert re.search(rf"^{len(expected)} passed, 0 failed, 0 skipped", out, re.M), tail
