"""tests/conftest.py's watchdog ends a session whose test is stuck where pytest-timeout's
SIGALRM cannot reach (here: SIGALRM blocked in the main thread, as a C call that never returns
to the interpreter would leave it), and prints where it was stuck."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

STUCK = """
import signal, threading, time
import pytest

@pytest.mark.timeout(1)
def test_stuck():
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    time.sleep(90)  # stands for librdkafka's wait that ignores its timeout
"""


@pytest.mark.timeout(120)
def test_a_test_stuck_out_of_reach_of_sigalrm_ends_the_session(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_stuck.py").write_text(STUCK)
    began = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-o",
            "timeout=600",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_stuck.py"),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYDMQ_WATCHDOG_GRACE": "2"},
        capture_output=True,
        text=True,
        timeout=80,
    )
    took = time.monotonic() - began
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Timeout (" in proc.stderr, proc.stderr[-2000:]
    assert "test_stuck.py" in proc.stderr and "in test_stuck" in proc.stderr, proc.stderr[-3000:]
    print(f"\nthe watchdog ended the stuck session after {took:.1f} s (the test would sleep 90 s)")
