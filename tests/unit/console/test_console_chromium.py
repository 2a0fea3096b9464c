"""The console in a real browser: headless Chromium (Debian's ``chromium``, installed by
scripts/test) loads each page from a real ``pydmq serve``, and the DOM it built is checked;
each call also writes a screenshot (PNG). Set ``PYDMQ_CONSOLE_SCREENSHOTS=docs/console`` to
write them where the docs show them.

Every Chromium call is bounded; on a timeout its whole process group (the browser this test
started and its children, nothing else) is killed."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from console_http import GROUP, TOPIC, group_path

from pydmq.testing.process import BrokerProcess

pytestmark = pytest.mark.timeout(180)

CHROMIUM = shutil.which("chromium")
CALL_TIMEOUT_S = 60

# page -> (path, what its DOM must hold)
PAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "cluster": ("/", ('<table id="brokers">', '<table id="quorum">', "Active controller")),
    "topics": ("/topics", ('<table id="topics">', f'href="/topics/{TOPIC}"')),
    "topic": (f"/topics/{TOPIC}", ('<table id="partitions">', '<table id="configs">')),
    "groups": ("/groups", ('<table id="groups">', "&lt;script&gt;alert(1)&lt;/script&gt;")),
    "group": (group_path(), ('<svg id="lag-plot"', '<polyline class="series"', "Total lag")),
}


def _browse(url: str, screenshot: Path, profile: Path) -> str:
    """The DOM Chromium built from ``url`` (it writes ``screenshot`` on the way)."""
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # we run as root (CI too)
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--window-size=1100,900",
        f"--screenshot={screenshot}",
        "--dump-dom",
        url,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: killed whole on a timeout
    )
    try:
        out, _ = process.communicate(timeout=CALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"chromium did not load {url} within {CALL_TIMEOUT_S} s") from None
    assert process.returncode == 0, f"chromium exited {process.returncode} on {url}"
    return out.decode()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test installs it)")
def test_pages_in_headless_chromium(console_broker: BrokerProcess, tmp_path: Path) -> None:
    shots = Path(os.environ.get("PYDMQ_CONSOLE_SCREENSHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    for name, (path, expected) in PAGES.items():
        url = f"http://127.0.0.1:{console_broker.http_port}{path}"
        screenshot = shots / f"{name}.png"
        dom = _browse(url, screenshot, tmp_path / "profile")
        for fragment in expected:
            assert fragment in dom, f"{name}: {fragment!r} not in the DOM"
        assert re.search(r"<h1>[^<]+</h1>", dom), name
        assert GROUP not in dom, f"{name}: the group's name reached the DOM unescaped"
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
