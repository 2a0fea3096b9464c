"""Start-up cost of a single node that hosts N partitions: ``Broker()`` and exec -> listening.

For each N (1,000 / 30,000 / 100,000 by default) and each source tree, a data dir is built
once by that tree (topics of ``--topic-partitions`` partitions created through
``topic_creator.create_topic``, ``topic_ops`` in older trees, ``pydmq.max.broker.partitions``
raised to fit), then two figures
are taken in fresh processes, the trees' runs interleaved so that load from elsewhere hits
them alike:

* broker: constructing ``Broker(config)`` on that data dir (imports done before the clock
  starts): reading the topics back, from ``topics.json`` or the metadata log and its
  snapshot;
* serve: wall time from starting ``pydmq serve`` to its listener accepting a connection.

    python benchmarks/single_node_restart.py
    python benchmarks/single_node_restart.py --src /tmp/base/src --src src   # A/B
    python benchmarks/single_node_restart.py --partitions 30000 --runs 9

Data dirs live under ``--dir`` (default: a temporary directory on /dev/shm when it exists,
so that building them is not an fsync benchmark) and are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
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

_BUILD = """
import sys
from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
try:  # the composition root since issue 16 part 2; older trees build the Broker itself
    from pydmq.node import Node as Root
except ImportError:
    Root = Broker
data_dir, total, per_topic = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config = BrokerConfig({
    "log.dirs": data_dir,
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "pydmq.max.broker.partitions": str(total + 1000),
})
node = Root(config)
broker = getattr(node, "broker", node)
# topic_ops in trees before the admin path went through the controller (5f48ec2)
creator = getattr(broker, "topic_creator", None) or broker.topic_ops
made = 0
while made < total:
    count = min(per_topic, total - made)
    creator.create_topic(f"bench-{made // per_topic:05d}", count)
    made += count
broker.replica_manager.shutdown()
"""

_TIME_BROKER = """
import sys, time
from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
try:  # the composition root since issue 16 part 2; older trees build the Broker itself
    from pydmq.node import Node as Root
except ImportError:
    Root = Broker
config = BrokerConfig({"log.dirs": sys.argv[1], "listeners": "PLAINTEXT://127.0.0.1:0"})
t0 = time.perf_counter()
node = Root(config)
elapsed = time.perf_counter() - t0
broker = getattr(node, "broker", node)
assert sum(len(t.partitions) for t in broker.topics) == int(sys.argv[2])
print(elapsed)
"""


def serve_once(src: str | None, data_dir: str) -> float:
    """Seconds from exec of ``pydmq serve`` on ``data_dir`` to a successful TCP connect."""
    proc, port, started = spawn_serve(serve_command(), data_dir, tree_env(src))
    try:
        return wait_listening(proc, port, started, poll_s=0.002)
    finally:
        proc.terminate()
        proc.wait(30)


def _fmt(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return f"median {statistics.median(ms):8.1f} ms   min {ms[0]:8.1f}   max {ms[-1]:8.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    parser.add_argument(
        "--partitions", type=int, action="append", help="N (repeatable; 1k/30k/100k)"
    )
    parser.add_argument("--topic-partitions", type=int, default=1000, help="per topic")
    parser.add_argument("--no-serve", action="store_true", help="skip the serve figure")
    parser.add_argument("--dir", help="where to build the data dirs")
    parser.add_argument(
        "--src", action="append", help="source tree to put first on PYTHONPATH (repeatable)"
    )
    args = parser.parse_args()
    srcs: list[str | None] = list(args.src or [None])
    sizes: list[int] = list(args.partitions or [1_000, 30_000, 100_000])
    base = args.dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    root = tempfile.mkdtemp(prefix="pydmq-restart-", dir=base)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {args.runs} runs each")
    try:
        for n in sizes:
            dirs: dict[str | None, str] = {}
            for i, src in enumerate(srcs):
                dirs[src] = os.path.join(root, f"{n}-{i}")
                run_in_tree(src, _BUILD, dirs[src], str(n), str(args.topic_partitions))
                run_in_tree(src, _TIME_BROKER, dirs[src], str(n))  # first start: caches, upgrades
            samples: dict[tuple[str, str | None], list[float]] = {}
            for _ in range(args.runs):
                for src in srcs:
                    broker = float(run_in_tree(src, _TIME_BROKER, dirs[src], str(n)))
                    samples.setdefault(("broker", src), []).append(broker)
                    if not args.no_serve:
                        samples.setdefault(("serve", src), []).append(serve_once(src, dirs[src]))
            for src in srcs:
                label = f" [{src}]" if src is not None else ""
                print(f"N={n:,}{label}")
                print(f"  Broker()             {_fmt(samples['broker', src])}")
                if not args.no_serve:
                    print(f"  serve exec->listening {_fmt(samples['serve', src])}")
            for path in dirs.values():
                shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
