"""Start-up cost: importing the handler set and ``pydmq serve`` exec -> listening.

Each figure is the median of N fresh processes, with bytecode caches written first (the
variable PYTHONDONTWRITEBYTECODE is removed from the children's environment, as users have
caches). Three figures:

* messages: importing the generated codec modules the built-in handlers use, in a process
  that already imported their runtime dependencies (the cost the code generator controls);
* handlers: importing every built-in handler module (``HANDLER_MODULES``) from scratch;
* serve: wall time from starting ``pydmq serve`` to its listener accepting a connection.

    python benchmarks/import_time.py            # 7 runs each
    python benchmarks/import_time.py --runs 15
    python benchmarks/import_time.py --src /tmp/before/src --src src   # A/B, interleaved

With ``--src`` (repeatable) each figure is measured for each source tree put first on
PYTHONPATH, the trees' runs interleaved so that load from elsewhere hits them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import (  # noqa: E402
    run_in_tree,
    serve_command,
    spawn_serve,
    tree_env,
    wait_listening,
)

_LIST_MESSAGES = """
import importlib, json, sys
from pydmq.plugins.builtin import HANDLER_MODULES
for name in HANDLER_MODULES:
    importlib.import_module(f"pydmq.broker.handlers.{name}")
prefix = "pydmq.protocol.messages."
print(json.dumps(sorted(m for m in sys.modules if m.startswith(prefix))))
"""

_TIME_MESSAGES = """
import importlib, json, sys, time
import dataclasses, typing, uuid
import pydmq.protocol.errors, pydmq.protocol.primitives, pydmq.protocol.messages
names = json.loads(sys.argv[1])
t0 = time.perf_counter()
for name in names:
    importlib.import_module(name)
print(time.perf_counter() - t0)
"""

_TIME_HANDLERS = """
import time
t0 = time.perf_counter()
import importlib
from pydmq.plugins.builtin import HANDLER_MODULES
for name in HANDLER_MODULES:
    importlib.import_module(f"pydmq.broker.handlers.{name}")
print(time.perf_counter() - t0)
"""


def serve_once(src: str | None = None) -> float:
    """Seconds from exec of ``pydmq serve`` to a successful TCP connect."""
    with tempfile.TemporaryDirectory() as data_dir:
        proc, port, started = spawn_serve(serve_command(), data_dir, tree_env(src))
        try:
            return wait_listening(proc, port, started, poll_s=0.002)
        finally:
            proc.terminate()
            proc.wait(10)


def _fmt(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"median {statistics.median(ms):7.1f} ms   min {ms[0]:7.1f}   max {ms[-1]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure")
    parser.add_argument("--no-serve", action="store_true", help="skip the serve figure")
    parser.add_argument(
        "--src", action="append", help="source tree to put first on PYTHONPATH (repeatable)"
    )
    args = parser.parse_args()
    srcs: list[str | None] = list(args.src or [None])

    names: dict[str | None, list[str]] = {}
    for src in srcs:  # also writes the bytecode caches
        names[src] = json.loads(run_in_tree(src, _LIST_MESSAGES))
        if not args.no_serve:
            serve_once(src)

    def messages(src: str | None) -> float:
        return float(run_in_tree(src, _TIME_MESSAGES, json.dumps(names[src])))

    def handlers(src: str | None) -> float:
        return float(run_in_tree(src, _TIME_HANDLERS))

    samples: dict[tuple[str, str | None], list[float]] = {}
    figures: list[tuple[str, Callable[[str | None], float]]] = [
        ("messages", messages),
        ("handlers", handlers),
    ]
    if not args.no_serve:
        figures.append(("serve", serve_once))
    for _ in range(args.runs):
        for figure, measure in figures:
            for src in srcs:
                samples.setdefault((figure, src), []).append(measure(src))

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {args.runs} runs each")
    for src in srcs:
        if src is not None:
            print(f"[{src}]")
        print(f"messages ({len(names[src])} modules) {_fmt(samples['messages', src])}")
        print(f"handlers (all built-in) {_fmt(samples['handlers', src])}")
        if not args.no_serve:
            print(f"serve exec->listening    {_fmt(samples['serve', src])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
