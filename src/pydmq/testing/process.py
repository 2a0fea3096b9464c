"""BrokerProcess: ``python -m pydmq serve`` as a child process on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from pydmq.testing.ports import free_port

__all__ = ["BrokerProcess", "free_port"]


class BrokerProcess:
    """A broker in its own process; ``kill()`` sends a real signal to that PID only."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        overrides: Mapping[str, object] | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port or free_port(host)
        # The HTTP listener on a free port of its own (never the default 8082).
        self.http_port = free_port(host)
        self.overrides = dict(overrides or {})
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "broker.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "pydmq",
            "serve",
            "--listeners",
            f"PLAINTEXT://{self.host}:{self.port}",
            "--log-dirs",
            str(self.data_dir),
            "--http-listener",
            f"http://[{self.host}]:{self.http_port}"
            if ":" in self.host
            else f"http://{self.host}:{self.http_port}",
        ]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"broker exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(
            f"broker did not listen on {self.bootstrap} within {timeout} s\n{self.log_tail()}"
        )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
                self.process.wait(30)

    def log_tail(self, size: int = 4000) -> str:
        """The end of the broker's log file (for failure messages)."""
        try:
            return self.log_path.read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return "(no broker log)"

    def restart(self, timeout: float = 20.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None
