"""``pydmq cluster up`` as a user runs it, for the tests that need the real command."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cluster_up", "consecutive_free_ports"]


def consecutive_free_ports(count: int) -> int:
    """A base port below the ephemeral range with ``count`` free ports from it."""
    for _ in range(200):
        base = random.randrange(20000, 32000)
        sockets: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free port range")


@contextlib.contextmanager
def cluster_up(root: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """``pydmq cluster up 3 [extra...]`` in a session of its own; yields it once it printed
    its bootstrap line, with that line's addresses and every line so far."""
    base = consecutive_free_ports(20)
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "pydmq", "cluster", "up", "3", "--data-dir", str(root)),
            *("--base-port", str(base), "--controller-base-port", str(base + 10)),
            *("--http-base-port", "0"),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # As a shell's background job starts it (SIGINT ignored, inherited through exec): the
        # Ctrl-C below must stop it all the same (a CI runner launched this way once saw the
        # nodes stop and `cluster up` report "every node has exited" with status 1).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("bootstrap:") or "did not come up" in line:
                break
        assert lines and lines[-1].startswith("bootstrap:"), "".join(lines)
        yield process, lines[-1].split()[1], lines
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
