"""prometheus_client is imported at the first scrape, never at start-up (it costs ~0.1 s)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

CHILD = textwrap.dedent(
    """
    import json, sys, urllib.request
    from pydmq.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(sys.argv[1]) as broker:
        started = "prometheus_client" in sys.modules
        url = f"http://127.0.0.1:{broker.http_port}/metrics"
        urllib.request.urlopen(url, timeout=10).read()
        scraped = "prometheus_client" in sys.modules
    print(json.dumps([started, scraped]))
    """
)


def test_prometheus_client_is_imported_at_the_first_scrape(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=50,
        check=True,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == [False, True]
