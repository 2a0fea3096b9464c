"""A stand-in for ``pydmq serve`` in process-management tests: binds the listeners, idles.

Run as ``python fake_node.py serve --listeners A://h:p,B://h:q --log-dirs DIR ...``. It writes
``DIR/fake-node.json`` (its pid and argv) just before listening, accepts and drops
connections, and exits 0 on SIGTERM/SIGINT. Overrides change that:
``-o fake.ignore.sigterm=true`` (only SIGKILL stops it), ``-o fake.exit.after.ms=N`` (exit 3
after N ms), ``-o fake.fail.on.start=true`` (exit 3 at once, before listening).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path


def _option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def _overrides(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, word in enumerate(argv):
        if word in ("-o", "--override") and i + 1 < len(argv):
            key, _, value = argv[i + 1].partition("=")
            out[key] = value
    return out


def _serve(sock: socket.socket) -> None:
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        conn.close()


def main(argv: list[str]) -> int:
    assert argv and argv[0] == "serve", argv
    overrides = _overrides(argv)
    if overrides.get("fake.fail.on.start") == "true":
        print("fake node failing on start", flush=True)
        return 3
    log_dir = Path(_option(argv, "--log-dirs") or ".")
    log_dir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    if overrides.get("fake.ignore.sigterm") == "true":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    # Written before listening: whoever sees the ports open may read it.
    info = {"pid": os.getpid(), "argv": argv}
    (log_dir / "fake-node.json.tmp").write_text(json.dumps(info))
    os.replace(log_dir / "fake-node.json.tmp", log_dir / "fake-node.json")
    for uri in (_option(argv, "--listeners") or "").split(","):
        address = uri.partition("://")[2]
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen()
        threading.Thread(target=_serve, args=(sock,), daemon=True).start()
    print(f"fake node {os.getpid()} listening", flush=True)
    exit_after = overrides.get("fake.exit.after.ms")
    deadline = time.monotonic() + int(exit_after) / 1000 if exit_after else None
    while not stop.wait(0.05):
        if deadline is not None and time.monotonic() >= deadline:
            print("fake node exiting on purpose", flush=True)
            return 3
    print("fake node stopping", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
