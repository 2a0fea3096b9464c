"""franz-go's own pkg/kgo tests against pydmq (the CI subset).

compat/franz-go/run.sh takes franz-go's module (with its ``_test.go`` files) from the Go module
proxy into ``$PYDMQ_WORK/franz-go`` (default /tmp/pydmq-compat; cached, as is the compiled test
binary, so only the first run pays the 1-3 min build), starts its own pydmq broker on a free
loopback port and runs the tests listed in compat/franz-go/tests.allow, each in its own
process of the test binary. This test asserts that every allow-listed test passes. The full
run against pydmq and Apache Kafka 4.4, and why each other test is left out:
compat/franz-go/README.md and FINDINGS.md.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "compat" / "franz-go" / "run.sh"
ALLOW = ROOT / "compat" / "franz-go" / "tests.allow"

# The allow-listed subset runs in about two minutes on 2 cores; run.sh bounds each test.
TIMEOUT = float(os.environ.get("PYDMQ_FRANZ_GO_TIMEOUT", "600"))
# First run on a new machine: module download plus `go test -c` (1-3 min on 2 cores).
BUILD_TIMEOUT = float(os.environ.get("PYDMQ_FRANZ_GO_BUILD_TIMEOUT", "900"))
NO_GO = 4  # run.sh's exit status when there is no Go toolchain
# KGO_TEST_RECORDS for the ETL tests: enough for several rebalances mid-stream, short for CI.
RECORDS = "20000"


def allowed() -> list[str]:
    names = []
    for line in ALLOW.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert re.fullmatch(r"Test\w+", line), f"bad tests.allow line: {line!r}"
            names.append(line)
    return names


@pytest.mark.timeout(BUILD_TIMEOUT + TIMEOUT + 60)
def test_franz_go_allowed_subset() -> None:
    expected = allowed()
    assert expected, "tests.allow is empty"
    build = subprocess.run(
        ["bash", str(RUN), "--fetch-only"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    if build.returncode == NO_GO:
        pytest.skip(f"no Go toolchain on this machine: {build.stdout.strip()[-300:]}")
    assert build.returncode == 0, build.stdout

    proc = subprocess.run(
        ["bash", str(RUN), "--allowed", "--records", RECORDS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
    )
    out = proc.stdout
    tail = "\n".join(out.splitlines()[-60:])
    verdicts = {
        name: status
        for status, name in re.findall(r"^(PASSED|FAILED|SKIPPED)\s+[\d.]+s\s+(\w+)", out, re.M)
    }
    missing = [t for t in expected if t not in verdicts]
    assert not missing, f"no verdict for {missing}:\n{tail}"
    not_passed = {t: verdicts[t] for t in expected if verdicts[t] != "PASSED"}
    assert not not_passed, f"allow-listed franz-go tests did not pass: {not_passed}\n{tail}"
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{tail}"
    assert re.search(rf"^{len(expected)} passed, 0 failed, 0 skipped", out, re.M), tail
