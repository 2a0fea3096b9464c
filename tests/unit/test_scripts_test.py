"""``scripts/test`` (hence CI's ``.ci/run``) type-checks src with ``mypy --strict`` before pytest.

The script runs in a scratch copy whose ``.venv/bin/python`` is a stub that records how it was
called and fails ``-m mypy`` when told to (``PYDMQ_SKIP_INSTALL=1``: nothing is installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test"

STUB = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in
    *"-m mypy"*) [ -f "$(dirname "$0")/mypy-fails" ] && { echo "src/x.py: error"; exit 1; } ;;
esac
exit 0
"""


def _run(tmp_path: Path, *, mypy_fails: bool) -> tuple[int, list[str], str]:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "test")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    stub = bin_dir / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    if mypy_fails:
        (bin_dir / "mypy-fails").touch()
    env = {**os.environ, "PYDMQ_SKIP_INSTALL": "1"}
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "test"), "tests/unit", "-k", "x"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    calls = (bin_dir / "calls").read_text().splitlines()
    return done.returncode, calls, done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/test is a bash script")
def test_a_type_error_fails_the_run_before_any_test(tmp_path: Path) -> None:
    code, calls, output = _run(tmp_path, mypy_fails=True)
    assert code != 0, output
    assert "-m mypy --strict src" in calls
    assert not any("-m pytest" in call for call in calls), calls
    assert "mypy --strict src found type errors" in output


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/test is a bash script")
def test_pytest_runs_with_the_arguments_once_types_check(tmp_path: Path) -> None:
    code, calls, output = _run(tmp_path, mypy_fails=False)
    assert code == 0, output
    mypy = calls.index("-m mypy --strict src")
    pytest_calls = [i for i, call in enumerate(calls) if call.startswith("-m pytest")]
    assert pytest_calls, calls
    assert pytest_calls[0] > mypy
    assert calls[pytest_calls[0]].endswith("tests/unit -k x")
