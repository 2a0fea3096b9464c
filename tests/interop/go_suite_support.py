"""Running a Go client's own test suite through its compat/<suite>/run.sh (franz-go,
kafka-go) and checking that every allow-listed test passed.

Each run.sh builds (or reuses) the module's test binary with ``--fetch-only``, then runs the
tests named in its tests.allow against its own broker, printing one
``PASSED|FAILED|SKIPPED <secs>s <name> ...`` line per test and a closing
``N passed, M failed, K skipped`` line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_GO = 4  # run.sh's exit status when there is no Go toolchain


def allowed(allow: Path) -> list[str]:
    """The top-level test names of a tests.allow file ('#' starts a comment)."""
    names = []
    for line in allow.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert re.fullmatch(r"Test\w+", line), f"bad tests.allow line: {line!r}"
            names.append(line)
    return names


def run_allowed(
    suite: str,
    run_args: list[str],
    timeout: float,
    build_timeout: float,
    unavailable: dict[int, str] | None = None,
) -> None:
    """Build, then run compat/<suite>/run.sh --allowed RUN_ARGS; fail unless every test in
    compat/<suite>/tests.allow passed. ``unavailable`` maps run.sh exit codes that mean "this
    machine lacks what the suite needs" to the skip reason."""
    run = ROOT / "compat" / suite / "run.sh"
    expected = allowed(ROOT / "compat" / suite / "tests.allow")
    assert expected, "tests.allow is empty"
    skips = {NO_GO: "no Go toolchain on this machine", **(unavailable or {})}
    build = subprocess.run(
        ["bash", str(run), "--fetch-only"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=build_timeout,
    )
    if build.returncode in skips:
        pytest.skip(f"{skips[build.returncode]}: {build.stdout.strip()[-300:]}")
    assert build.returncode == 0, build.stdout

    proc = subprocess.run(
        ["bash", str(run), "--allowed", *run_args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    out = proc.stdout
    tail = "\n".join(out.splitlines()[-60:])
    if proc.returncode in skips:
        pytest.skip(f"{skips[proc.returncode]}: {tail[-300:]}")
    verdicts = {
        name: status
        for status, name in re.findall(r"^(PASSED|FAILED|SKIPPED)\s+[\d.]+s\s+(\w+)", out, re.M)
    }
    missing = [t for t in expected if t not in verdicts]
    assert not missing, f"no verdict for {missing}:\n{tail}"
    not_passed = {t: verdicts[t] for t in expected if verdicts[t] != "PASSED"}
    assert not not_passed, f"allow-listed {suite} tests did not pass: {not_passed}\n{tail}"
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{tail}"
    assert re.search(rf"^{len(expected)} passed, 0 failed, 0 skipped", out, re.M), tail
