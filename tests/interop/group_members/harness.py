"""Runs group members (one process each) and reads back what they report.

Every member kind takes the same options and writes the same JSON lines (_member.py):
``ck`` confluent-kafka, ``kp`` kafka-python, ``aio`` aiokafka, ``java`` kafka-clients
through ``InteropClient group-consume``. Only processes started here are ever signalled.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ..support import java_classpath, java_ready

HERE = Path(__file__).resolve().parent
SCRIPTS = {"ck": "ck_member.py", "kp": "kp_member.py", "aio": "aio_member.py"}
T = TypeVar("T")


@dataclass
class Member:
    name: str
    kind: str
    out: Path
    log: Path
    proc: subprocess.Popen[bytes]
    _events: list[dict] = field(default_factory=list)
    _pos: int = 0

    def events(self) -> list[dict]:
        """All complete lines written so far (incrementally re-read)."""
        with self.out.open("rb") as f:
            f.seek(self._pos)
            data = f.read()
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            if line.startswith(b"{"):
                self._events.append(json.loads(line))
        self._pos += end
        return self._events

    def records(self) -> list[dict]:
        return [e for e in self.events() if e["e"] == "m"]

    def rebalances(self) -> list[dict]:
        return [e for e in self.events() if e["e"] in ("a", "r", "l")]

    def owned(self) -> set[int]:
        """Partitions owned now, applying callbacks as deltas (right for eager too:
        eager revokes everything before each assign)."""
        owned: set[int] = set()
        for e in self.rebalances():
            if e["e"] == "a":
                owned |= set(e["p"])
            else:
                owned -= set(e["p"])
        return owned

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


def spawn(
    kind: str,
    name: str,
    workdir: Path,
    *,
    bootstrap: str,
    topic: str,
    group: str,
    strategy: str,
    stop_file: Path,
    session_ms: int = 6000,
    heartbeat_ms: int = 1000,
    rate: float = 0.0,
    batch: int = 100,
    instance_id: str | None = None,
    max_seconds: float = 240.0,
) -> Member:
    out = workdir / f"{name}.jsonl"
    log = workdir / f"{name}.log"
    out.touch()
    opts = [
        "--bootstrap", bootstrap,
        "--topic", topic,
        "--group", group,
        "--strategy", strategy,
        "--session-ms", str(session_ms),
        "--heartbeat-ms", str(heartbeat_ms),
        "--batch", str(batch),
        "--rate", str(rate),
        "--stop-file", str(stop_file),
        "--max-seconds", str(max_seconds),
    ]  # fmt: skip
    if instance_id:
        opts += ["--instance-id", instance_id]
    with log.open("ab") as err:
        if kind == "java":
            reason = java_ready()
            if reason:
                raise RuntimeError(reason)
            cmd = [
                "java",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                java_classpath(),
                "InteropClient",
                "group-consume",
                *opts,
            ]
            with out.open("ab") as stdout:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=err)
        else:
            cmd = [sys.executable, str(HERE / SCRIPTS[kind]), *opts, "--out", str(out)]
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
    return Member(name, kind, out, log, proc)


def stop(members: Iterable[Member], stop_file: Path, timeout: float = 30.0) -> None:
    """Ask every member to close (stop file), then SIGKILL whatever is still running."""
    stop_file.touch()
    deadline = time.monotonic() + timeout
    for m in members:
        with contextlib.suppress(subprocess.TimeoutExpired):
            m.proc.wait(max(0.1, deadline - time.monotonic()))
        if m.proc.poll() is None:
            m.kill()


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float,
    members: Iterable[Member] = (),
    interval: float = 0.1,
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail (with member logs) on timeout or
    when one of ``members`` died."""
    members = list(members)
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        dead = [m for m in members if not m.alive()]
        if dead or time.monotonic() >= deadline:
            detail = "\n".join(
                f"--- {m.name} ({m.kind}) rc={m.proc.poll()} log tail ---\n{m.log_tail()}"
                for m in members
            )
            why = f"died: {[m.name for m in dead]}" if dead else f"timed out after {timeout}s"
            raise AssertionError(f"waiting for {what}: {why}\n{detail}")
        time.sleep(interval)


def assignments_by_generation(member: Member) -> dict[int, set[int]]:
    """Eager protocols: what the member was assigned in each generation."""
    out: dict[int, set[int]] = {}
    for e in member.rebalances():
        if e["e"] == "a":
            out.setdefault(e["g"], set()).update(e["p"])
    return out
