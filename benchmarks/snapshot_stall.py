"""Another client's ApiVersions latency while a single node snapshots its metadata log.

For each source tree: ``pydmq serve`` on a fresh data dir with
``metadata.log.max.snapshot.interval.records=1`` (every change takes a snapshot), N partitions
created through CreateTopics (topics of 1,000), then ``--changes`` CreateTopics of one
partition each, ``--gap`` seconds apart, each taking a snapshot of all N partitions. Meanwhile
a second client sends ApiVersions back to back on its own connection; its latencies during
that phase are printed (p50, p99, max), with the CreateTopics latencies.

    python benchmarks/snapshot_stall.py
    python benchmarks/snapshot_stall.py --src /tmp/before/src --src src   # A/B
    python benchmarks/snapshot_stall.py --partitions 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import free_port, wait_listening  # noqa: E402

from pydmq.client import KafkaClient  # noqa: E402
from pydmq.protocol.errors import ErrorCode  # noqa: E402
from pydmq.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from pydmq.protocol.messages.create_topics import (  # noqa: E402
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
API_VERSIONS = 18


def _env(src: str | None) -> dict[str, str]:
    if src is None:
        return ENV
    path = [str(Path(src).resolve()), *filter(None, [ENV.get("PYTHONPATH")])]
    return {**ENV, "PYTHONPATH": os.pathsep.join(path)}


def _create(client: KafkaClient, name: str, partitions: int) -> float:
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
        timeout=60_000,
    )
    started = time.perf_counter()
    response = client.call(request, CreateTopicsResponse)
    elapsed = time.perf_counter() - started
    if response.topics[0].error_code != ErrorCode.NONE:
        raise RuntimeError(f"creating {name}: {response.topics[0]}")
    return elapsed


def _probe(bootstrap: str, stop: threading.Event, latencies: list[float]) -> None:
    with KafkaClient(bootstrap, timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.send(API_VERSIONS, ApiVersionsRequest(), version=0)
            latencies.append(time.perf_counter() - started)


def run(src: str | None, partitions: int, changes: int, gap: float, root: str) -> None:
    data_dir = tempfile.mkdtemp(dir=root)
    port = free_port()
    config = Path(data_dir) / "server.properties"
    config.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={data_dir}/data\n"
        "metadata.log.max.snapshot.interval.records=1\n"
        f"pydmq.max.broker.partitions={partitions + 1000}\n"
    )
    command = [sys.executable, "-m", "pydmq", "serve", "--config", str(config)]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*command, "--log-level", "WARNING"],
        env=_env(src),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(proc, port, started, poll_s=0.01)
        bootstrap = f"127.0.0.1:{port}"
        with KafkaClient(bootstrap, timeout=120) as admin:
            made = 0
            while made < partitions:
                count = min(1000, partitions - made)
                _create(admin, f"bench-{made // 1000:05d}", count)
                made += count
            time.sleep(2 * gap)  # the last build snapshot is done
            stop = threading.Event()
            latencies: list[float] = []
            prober = threading.Thread(target=_probe, args=(bootstrap, stop, latencies))
            prober.start()
            time.sleep(gap)
            creates = []
            for i in range(changes):
                creates.append(_create(admin, f"probe-{i}", 1))
                time.sleep(gap)
            stop.set()
            prober.join(60)
        label = f" [{src}]" if src is not None else ""
        print(f"N={partitions:,}{label}: {changes} snapshots")
        print(f"  ApiVersions ({len(latencies)}) {_fmt(latencies)}")
        print(f"  CreateTopics ({len(creates)})  {_fmt(creates)}")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data_dir, ignore_errors=True)


def _fmt(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"p50 {statistics.median(ms):7.1f} ms   p99 {p99:7.1f}   max {ms[-1]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=30_000)
    parser.add_argument("--changes", type=int, default=10, help="snapshots measured")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between changes")
    parser.add_argument(
        "--src", action="append", help="source tree to put first on PYTHONPATH (repeatable)"
    )
    args = parser.parse_args()
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix="pydmq-stall-", dir=base)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    try:
        for src in args.src or [None]:
            run(src, args.partitions, args.changes, args.gap, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
