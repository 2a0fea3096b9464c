"""Cost of partitions on one node, pydmq beside Apache Kafka 4.4 in the same run (issue 21).

For each broker of ``--brokers`` and each N of ``--partitions`` (one broker at a time, a fresh
data dir per N), the broker is started under ``prlimit --nofile`` (pydmq: ``--nofile``,
4,096 by default, the issue's goal; Kafka: ``--kafka-nofile``, the file limit it needs, by
default this process's hard limit, which a process without CAP_SYS_RESOURCE cannot raise) and:

1. **create**: N partitions as topics of ``--topic-partitions`` (RF 1) through
   confluent-kafka's AdminClient, ``--batch`` topics per CreateTopics, timed until Metadata
   shows every partition with a leader;
2. **idle**: ``--idle`` seconds later, the broker's RSS, memory per idle partition ((RSS
   with N - RSS empty) / N), open files (entries of /proc/<pid>/fd) and the CPU it uses
   idle (over ``--idle-cpu`` seconds: maintenance passes over every partition);
3. **Metadata** (all topics) and **DescribeTopicPartitions** (all topics, following its
   cursor page by page, Kafka's default limit of 2,000 partitions a page): the round trip to
   the last byte of the answer on a raw socket (nothing decoded inside the clock; the
   cursor is decoded after), median of ``--answers`` (DescribeTopicPartitions' first walk
   also on its own: the first after the partitions were created);
4. **restart**: SIGTERM then start, and SIGKILL then start, each timed from the spawn (Kafka:
   from the exec of its JVM) until Metadata shows every partition with a leader.

A broker that fails a step (Kafka out of heap at 100,000 partitions, say) is stopped there;
the step and the reason are printed and recorded, and the larger Ns are skipped for it.
Restart after ``kill -9`` with data (10 GB in 1,000 partitions, the issue's other goal) is
``benchmarks/omb/restart.py``'s (``--data-bytes``); ``--with-data SIZE`` runs it after the
curve with 10 topics of 100 partitions.

Prints a table and writes every figure to ``--out`` (JSON). Only processes this script
started are signalled, by PID (``ManagedBroker``); data dirs (under ``--dir``, default a
temporary directory on the disk) are removed at the end.

    .venv/bin/python benchmarks/scale_partitions.py --partitions 1000 --partitions 20000
    .venv/bin/python benchmarks/scale_partitions.py --brokers pydmq --partitions 100000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.omb.procfs import git_commit, machine_info  # noqa: E402
from benchmarks.omb.restart import (  # noqa: E402
    BROKER_SETTINGS,
    BrokerExited,
    KafkaBroker,
    ManagedBroker,
    PydmqBroker,
    tree_cpu_seconds,
    tree_rss_bytes,
    wait_until,
)

from pydmq.client import KafkaClient  # noqa: E402
from pydmq.protocol.framing import SIZE, encode_request_frame, response_size  # noqa: E402
from pydmq.protocol.headers import parse_response_header  # noqa: E402
from pydmq.protocol.messages import API_SCHEMAS  # noqa: E402
from pydmq.protocol.messages.describe_topic_partitions import (  # noqa: E402
    Cursor,
    DescribeTopicPartitionsRequest,
)
from pydmq.protocol.messages.metadata import MetadataRequest  # noqa: E402
from pydmq.protocol.primitives import Reader  # noqa: E402

START_TIMEOUT_S = 300.0
METADATA, DESCRIBE_TOPIC_PARTITIONS = 3, 75  # API keys
PAGE_LIMIT = 2000  # DescribeTopicPartitions: Kafka's default response_partition_limit


@dataclass
class Curve:
    """The figures of one broker at one N (None: not reached)."""

    broker: str
    partitions: int
    figures: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None


def _limited(command: list[str], nofile: int) -> list[str]:
    return ["prlimit", f"--nofile={nofile}:{nofile}", "--", *command]


class LimitedPydmq(PydmqBroker):
    """pydmq under an open-file limit, admitting as many partitions as the run creates."""

    def __init__(self, work: Path, nofile: int, partitions: int) -> None:
        super().__init__(work)
        self.nofile = nofile
        self.process.overrides["pydmq.max.broker.partitions"] = partitions + 1000

    def command(self) -> list[str]:
        return _limited(super().command(), self.nofile)


class LimitedKafka(KafkaBroker):
    """Apache Kafka under the open-file limit it is given (prlimit is inherited by the JVM
    start.sh execs)."""

    def __init__(self, work: Path, nofile: int) -> None:
        super().__init__(work)
        self.nofile = nofile

    def command(self) -> list[str]:
        return _limited(super().command(), self.nofile)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def every_partition_led(total: int) -> Callable[[KafkaClient], bool]:
    """A check for :func:`wait_until`: Metadata (all topics) has ``total`` led partitions."""

    def check(client: KafkaClient) -> bool:
        response = client.refresh_metadata(None)
        led = sum(
            1
            for t in response.topics
            if t.error_code == 0 and not t.is_internal
            for p in t.partitions
            if p.error_code == 0 and p.leader_id >= 0
        )
        return led >= total

    return check


def create_partitions(bootstrap: str, topics: list[str], per_topic: int, batch: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for i in range(0, len(topics), batch):
        futures = admin.create_topics(
            [
                NewTopic(t, num_partitions=per_topic, replication_factor=1)
                for t in topics[i : i + batch]
            ],
            operation_timeout=120,
            request_timeout=180,
        )
        for future in futures.values():
            future.result(timeout=300)


class RawRoundTrip:
    """One plain connection timing request -> last byte of the answer, decoding outside the
    clock. Owned by the benchmark's thread."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=120)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionResetError("broker closed the connection")
            got += k
        return bytes(buf)

    def call(self, api_key: int, version: int, request: Any) -> tuple[float, int, Any]:
        """(seconds to the answer's last byte, answer bytes, decoded answer)."""
        self.correlation += 1
        data = encode_request_frame(api_key, version, request, self.correlation, "scale-bench")
        started = time.perf_counter()
        self.sock.sendall(data)
        frame = self._recv(response_size(self._recv(SIZE.size), 1 << 31))
        elapsed = time.perf_counter() - started
        reader = parse_response_header(frame, api_key, version)
        body = Reader(bytes(memoryview(frame)[reader.pos :]))
        return elapsed, len(frame), API_SCHEMAS[api_key].decode_response(body, version)


def metadata_answer(rt: RawRoundTrip) -> tuple[float, int]:
    elapsed, size, _ = rt.call(METADATA, 12, MetadataRequest(topics=None))
    return elapsed, size


def describe_all(rt: RawRoundTrip) -> tuple[float, int, int]:
    """Every partition through DescribeTopicPartitions' cursor: (seconds, bytes, pages)."""
    total = 0.0
    size = pages = 0
    cursor: Cursor | None = None
    while True:
        request = DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=PAGE_LIMIT, cursor=cursor
        )
        elapsed, n, response = rt.call(DESCRIBE_TOPIC_PARTITIONS, 0, request)
        total += elapsed
        size += n
        pages += 1
        if response.next_cursor is None:
            return total, size, pages
        cursor = Cursor(
            topic_name=response.next_cursor.topic_name,
            partition_index=response.next_cursor.partition_index,
        )


def restart_time(broker: ManagedBroker, total: int, how: str) -> float:
    if how == "clean":
        broker.terminate(START_TIMEOUT_S)
    else:
        broker.kill9()
    broker.spawn(how)
    ready = wait_until(broker, every_partition_led(total), START_TIMEOUT_S, f"{how} restart")
    return ready - broker.origin()


def measure(
    make: Callable[[Path, int], ManagedBroker], work: Path, n: int, args: argparse.Namespace
) -> Curve:
    broker = make(work, n)
    curve = Curve(broker.name, n)
    step = "start"
    try:
        broker.spawn("start")
        wait_until(broker, every_partition_led(0), START_TIMEOUT_S, "start")
        time.sleep(args.idle)
        empty_rss = tree_rss_bytes(broker.pid)
        step = "create"
        per_topic = min(args.topic_partitions, n)
        topics = [f"scale-{i:05d}" for i in range(n // per_topic)]
        started = time.perf_counter()
        create_partitions(broker.bootstrap, topics, per_topic, args.batch)
        wait_until(broker, every_partition_led(n), START_TIMEOUT_S, "every partition led")
        curve.figures["create_s"] = time.perf_counter() - started
        time.sleep(args.idle)
        step = "idle"
        rss = tree_rss_bytes(broker.pid)
        curve.figures["rss_mib"] = rss / 2**20
        curve.figures["bytes_per_partition"] = (rss - empty_rss) / n
        curve.figures["open_files"] = open_files(broker.pid)
        cpu = tree_cpu_seconds(broker.pid)
        time.sleep(args.idle_cpu)
        curve.figures["idle_cpu_pct"] = (tree_cpu_seconds(broker.pid) - cpu) / args.idle_cpu * 100
        step = "answers"
        rt = RawRoundTrip(broker.bootstrap)
        try:
            meta = [metadata_answer(rt) for _ in range(args.answers)]
            dtp = [describe_all(rt) for _ in range(args.answers)]
        finally:
            rt.close()
        curve.figures["metadata_ms"] = statistics.median(m[0] for m in meta) * 1000
        curve.figures["metadata_kib"] = meta[0][1] / 1024
        curve.figures["describe_ms"] = statistics.median(d[0] for d in dtp) * 1000
        # the first walk after the partitions were created: pydmq encodes each page then
        curve.figures["describe_first_ms"] = dtp[0][0] * 1000
        curve.figures["describe_pages"] = dtp[0][2]
        step = "clean restart"
        curve.figures["restart_clean_s"] = restart_time(broker, n, "clean")
        step = "kill -9 restart"
        curve.figures["restart_kill9_s"] = restart_time(broker, n, "kill9")
        curve.figures["open_files_after_restart"] = open_files(broker.pid)
    except (BrokerExited, TimeoutError, RuntimeError, OSError, Exception) as exc:
        curve.stopped = f"{step}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        broker.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    return curve


COLUMNS = [
    ("create_s", "create s", "{:.1f}"),
    ("rss_mib", "RSS MiB", "{:.0f}"),
    ("bytes_per_partition", "B/partition", "{:,.0f}"),
    ("open_files", "open files", "{:,.0f}"),
    ("idle_cpu_pct", "idle CPU %", "{:.1f}"),
    ("metadata_ms", "Metadata ms", "{:.1f}"),
    ("describe_first_ms", "DTP ms first walk", "{:.1f}"),
    ("describe_ms", "DTP ms (all pages)", "{:.1f}"),
    ("restart_clean_s", "restart s", "{:.2f}"),
    ("restart_kill9_s", "kill -9 restart s", "{:.2f}"),
]


def table(curves: list[Curve]) -> str:
    head = ["broker", "partitions", *(c[1] for c in COLUMNS)]
    rows = [head]
    for c in curves:
        cells = [c.broker, f"{c.partitions:,}"]
        for key, _, fmt in COLUMNS:
            cells.append(fmt.format(c.figures[key]) if key in c.figures else "-")
        rows.append(cells)
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("---" for _ in head) + "|")
    notes = [
        f"- {c.broker} at {c.partitions:,}: stopped at {c.stopped}" for c in curves if c.stopped
    ]
    return "\n".join(lines + notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", default="pydmq,kafka", help="comma-separated: pydmq,kafka")
    parser.add_argument("--partitions", type=int, action="append", help="N (repeatable)")
    parser.add_argument("--topic-partitions", type=int, default=1000, help="per topic")
    parser.add_argument(
        "--batch",
        type=int,
        default=5,
        help="topics per CreateTopics (Kafka's controller refuses more than 10,000 records "
        "in one operation: POLICY_VIOLATION)",
    )
    parser.add_argument("--nofile", type=int, default=4096, help="pydmq's open-file limit")
    parser.add_argument(
        "--kafka-nofile",
        type=int,
        default=resource.getrlimit(resource.RLIMIT_NOFILE)[1],
        help="Kafka's limit (default: the hard limit here, the most it can be given)",
    )
    parser.add_argument("--idle", type=float, default=5.0, help="seconds before RSS")
    parser.add_argument(
        "--idle-cpu", type=float, default=10.0, help="seconds the idle CPU is measured over"
    )
    parser.add_argument("--answers", type=int, default=3, help="Metadata/DTP answers timed")
    parser.add_argument("--dir", help="where the data dirs go (default: a temp dir on disk)")
    parser.add_argument("--out", default="build/scale_partitions.json")
    parser.add_argument(
        "--with-data", metavar="SIZE", help="then benchmarks/omb/restart.py with SIZE of data"
    )
    args = parser.parse_args()
    sizes: list[int] = sorted(args.partitions or [1_000, 10_000, 20_000, 100_000])
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    makers: dict[str, Callable[[Path, int], ManagedBroker]] = {
        "pydmq": lambda work, n: LimitedPydmq(work, args.nofile, n),
        "kafka": lambda work, _: LimitedKafka(work, args.kafka_nofile),
    }
    root = Path(tempfile.mkdtemp(prefix="pydmq-scale-", dir=args.dir))
    curves: list[Curve] = []
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; {BROKER_SETTINGS}", flush=True)
    try:
        for name in brokers:
            for n in sizes:
                curve = measure(makers[name], root / f"{name}-{n}", n, args)
                curves.append(curve)
                print(
                    json.dumps(
                        {"broker": name, "partitions": n, **curve.figures, "stopped": curve.stopped}
                    ),
                    flush=True,
                )
                if curve.stopped:
                    break
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(curves))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine_info(),
                "git_commit": git_commit(),
                "limits": {"pydmq_nofile": args.nofile, "kafka_nofile": args.kafka_nofile},
                "curves": [c.__dict__ for c in curves],
            },
            indent=1,
        )
    )
    if args.with_data:
        command = [
            sys.executable,
            "-m",
            "benchmarks.omb.restart",
            "--data-bytes",
            args.with_data,
            "--brokers",
            args.brokers,
            "--startup-runs",
            "1",
            "--restart-runs",
            "1",
        ]
        return subprocess.run(command, cwd=REPO, check=False).returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
