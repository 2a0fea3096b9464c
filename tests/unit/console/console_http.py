"""Helpers of the console tests: what the test broker holds, and an HTTP client (urllib)
over loopback."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pydmq.cluster_process import is_listening
from pydmq.testing.process import BrokerProcess

TOPIC = "orders"
GROUP = "<script>alert(1)</script>"
RECORDS = (12, 8)  # per partition
NODE = "1"  # pydmq serve's default node.id


@dataclass
class Page:
    status: int
    headers: dict[str, str]  # names in lower case
    text: str


def get(port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> Page:
    """One request over loopback; any status is returned, not raised."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", method=method, headers=headers or {}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return Page(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read().decode(),
            )
    except urllib.error.HTTPError as error:
        return Page(
            error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode()
        )


def post_json(port: int, path: str, body: Any, headers: dict[str, str] | None = None) -> int:
    """POST ``body`` as JSON; the status (an error status raises)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers=headers or {"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(response.status)


def wait_http(broker: BrokerProcess) -> None:
    deadline = time.monotonic() + 20
    while not is_listening("127.0.0.1", broker.http_port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no HTTP listener\n{broker.log_tail()}")
        time.sleep(0.02)


def group_path(group: str = GROUP) -> str:
    return f"/groups/{quote(group, safe='')}"
