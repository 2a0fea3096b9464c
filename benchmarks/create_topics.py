"""CreateTopics on a single node: 1,000 one-partition topics in one request, and one topic of
10,000 partitions, through the broker's CreateTopics handler called in process.

Each figure is the median of ``--runs`` fresh processes per source tree (a new data dir on
/dev/shm when it exists, so that this is not an fsync benchmark), the trees' runs interleaved
so that load from elsewhere hits them alike. Two figures per case:

* create: wall time of the handler's answer (validation, placement, opening the partitions,
  the metadata log entry);
* stall: the longest gap seen meanwhile by another task of the loop that wakes every 1 ms
  (what another connection would wait at most).

    python benchmarks/create_topics.py
    python benchmarks/create_topics.py --src /tmp/base/src --src src --runs 7   # A/B
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import run_in_tree  # noqa: E402

_CREATE = """
import asyncio, json, os, sys, tempfile, time
from pydmq.api.handler import RequestContext
from pydmq.broker.handlers import create_topics
from pydmq.broker.server import Broker
from pydmq.config.broker import BrokerConfig
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
try:  # the composition root since issue 16 part 2; older trees build the Broker itself
    from pydmq.node import Node as Root
except ImportError:
    Root = Broker

topics, partitions = int(sys.argv[1]), int(sys.argv[2])
shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
with tempfile.TemporaryDirectory(dir=shm) as data_dir:
    node = Root(BrokerConfig({
        "log.dirs": data_dir,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "pydmq.max.broker.partitions": str(topics * partitions + 1000),
    }))
    broker = getattr(node, "broker", node)
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=f"bench-{i:05d}", num_partitions=partitions, replication_factor=1)
            for i in range(topics)
        ],
        timeout=60000,
        validate_only=False,
    )
    host = getattr(broker, "services", broker)  # the handlers' ports since issue 16 part 2
    ctx = RequestContext(host, 19, 7, 1, "bench", "127.0.0.1", 1, "PLAINTEXT", 1)

    async def run():
        gaps = [0.0]
        done = False

        async def other():
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.ensure_future(other())
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        answer = create_topics.handle(ctx, request)
        response = await answer if hasattr(answer, "__await__") else answer
        elapsed = time.perf_counter() - t0
        done = True
        await ticker
        assert {t.error_code for t in response.topics} == {0}, response.topics[0]
        return elapsed, max(gaps)

    elapsed, stall = asyncio.run(run())
    assert sum(len(t.partitions) for t in broker.topics) == topics * partitions
    broker.replica_manager.shutdown()
print(json.dumps([elapsed, stall]))
"""

CASES = {"1,000 topics x 1 partition": (1000, 1), "1 topic x 10,000 partitions": (1, 10000)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per figure")
    parser.add_argument(
        "--src", action="append", help="source tree to measure (repeatable; default: installed)"
    )
    args = parser.parse_args()
    trees: list[str | None] = list(args.src) if args.src else [None]
    for case, (topics, partitions) in CASES.items():
        samples: dict[str | None, list[tuple[float, float]]] = {t: [] for t in trees}
        for _ in range(args.runs):
            for tree in trees:
                out = run_in_tree(tree, _CREATE, str(topics), str(partitions))
                elapsed, stall = json.loads(out.splitlines()[-1])
                samples[tree].append((elapsed, stall))
        for tree in trees:
            created = sorted(s[0] for s in samples[tree])
            stalls = sorted(s[1] for s in samples[tree])
            print(
                f"{case:30} {tree or 'installed':40} create median "
                f"{statistics.median(created) * 1000:7.1f} ms "
                f"(min {created[0] * 1000:.1f}, max {created[-1] * 1000:.1f}); "
                f"stall median {statistics.median(stalls) * 1000:6.1f} ms "
                f"(max {stalls[-1] * 1000:.1f})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
