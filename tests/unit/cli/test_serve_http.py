"""``pydmq serve`` and its HTTP listener: the default address, the flag, turning it off, a
real process answering on the port it was given, and a port in use refused by name."""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pydmq.cli import serve
from pydmq.cli.serve import build_config
from pydmq.cluster_process import is_listening
from pydmq.config.broker import BrokerConfig
from pydmq.config.http import HttpListener, HttpSettings
from pydmq.testing.process import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(60)


def _config(*argv: str) -> BrokerConfig:
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return build_config(parser.parse_args(["serve", *argv]))


def test_default_is_loopback_8082() -> None:
    settings = HttpSettings.from_config(_config())
    assert settings.listeners == (HttpListener("127.0.0.1", 8082),)


def test_flag_and_off() -> None:
    listeners = HttpSettings.from_config(
        _config("--http-listener", "http://0.0.0.0:9100,http://[::1]:9101")
    ).listeners
    assert listeners == (HttpListener("0.0.0.0", 9100), HttpListener("::1", 9101))
    assert HttpSettings.from_config(_config("--http-listener", "")).listeners == ()
    assert HttpSettings.from_config(_config("-o", "pydmq.http.listeners=")).listeners == ()


def test_malformed_listener_is_refused() -> None:
    with pytest.raises(ValueError, match=r"pydmq\.http\.listeners"):
        _config("--http-listener", "tcp://127.0.0.1:1")


def test_serve_answers_on_its_http_port(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", log_path=tmp_path / "broker.log").start()
    try:
        # the HTTP listener starts just after the Kafka listeners serve
        deadline = time.monotonic() + 10
        while not is_listening("127.0.0.1", broker.http_port) and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{broker.http_port}/v1/health/ready"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
            assert json.loads(answer.read())["status"] == "ready"
        assert f"http://127.0.0.1:{broker.http_port}" in broker.log_tail()
    finally:
        broker.stop()


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        http_port = taken.getsockname()[1]
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "pydmq", "serve", "--log-dirs", str(tmp_path / "d")),
                *("--listeners", f"PLAINTEXT://127.0.0.1:{free_port()}"),
                *("--http-listener", f"http://127.0.0.1:{http_port}"),
            ],
            capture_output=True,
            text=True,
            timeout=50,
        )
    assert proc.returncode == 1, proc.stderr
    assert f"pydmq.http.listeners: cannot listen on http://127.0.0.1:{http_port}" in proc.stderr
