"""Fixtures of the REST admin API tests: a real ``pydmq serve`` process and an HTTP client
over loopback (http.client)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pydmq.cluster_process import is_listening
from pydmq.testing.process import BrokerProcess


@dataclass
class Answer:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = self.json["error"]
        return error


class RestClient:
    """One request per connection to ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        sent = {"content-type": "application/json", **(headers or {})}
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            connection.close()


def start_broker(tmp: Path, overrides: dict[str, object] | None = None) -> BrokerProcess:
    broker = BrokerProcess(tmp / "data", log_path=tmp / "broker.log", overrides=overrides)
    broker.start()
    wait_http(broker)
    return broker


def wait_http(broker: BrokerProcess) -> None:
    deadline = time.monotonic() + 20
    while not is_listening("127.0.0.1", broker.http_port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no HTTP listener\n{broker.log_tail()}")
        time.sleep(0.02)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for a module's tests, its admin rate limit out of the way."""
    process = start_broker(
        tmp_path_factory.mktemp("rest"),
        {
            "pydmq.rest.admin.requests.per.minute": 100000,
            "pydmq.rest.monitoring.requests.per.minute": 100000,
        },
    )
    yield process
    process.stop()


@pytest.fixture
def rest(broker: BrokerProcess) -> RestClient:
    return RestClient("127.0.0.1", broker.http_port)


@pytest.fixture
def start() -> Any:
    """Starts a broker of the test's own (``start(tmp, overrides)``), waiting for its HTTP
    listener; the test stops it."""
    return start_broker


@pytest.fixture
def client() -> Any:
    """Makes a RestClient for a port (``client(port)``)."""
    return lambda port: RestClient("127.0.0.1", port)


@pytest.fixture
def restart() -> Any:
    """Restarts a broker (``restart(broker)``), waiting for its HTTP listener."""

    def again(broker: BrokerProcess) -> None:
        broker.restart()
        wait_http(broker)

    return again


@pytest.fixture(scope="session")
def http_ready() -> Any:
    """Waits for a broker's HTTP listener (``http_ready(broker)``)."""
    return wait_http
