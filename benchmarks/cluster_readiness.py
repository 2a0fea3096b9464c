"""Cluster readiness, dead-node and stop figures of ``pydmq cluster up 3`` (default settings).

Three parts, each repeated; every figure is printed, nothing is asserted:

1. ``--rounds`` (default 20): ``pydmq cluster up 3`` in a session of its own; as soon as it
   prints its bootstrap line, librdkafka's AdminClient creates an RF=3 topic (3 partitions).
   Reported: cluster start to the bootstrap line, bootstrap line to a created topic, and
   Ctrl-C (SIGINT to the session, as a terminal sends it) to the exit of every node, as
   ``cluster up`` itself reports it (``stopped in X s``).
2. ``--kills`` (default 5): a cluster up 3, an RF=3 topic of 6 partitions, a confluent-kafka
   producer with acks=all writing to every partition through a surviving node; the node that
   is both the active controller and a partition leader is ``kill -9``-ed. Reported: kill to
   Metadata naming new leaders for its partitions (asked of a surviving node every 20 ms),
   the acks=all stall (the longest delivery latency of a record enqueued around the kill, to
   the dead leader's partitions and, for comparison, to the others),
   whether ``pydmq topics describe`` and ``pydmq cluster status`` against a surviving node
   right after the kill succeed and show the dead node down, and Ctrl-C of the remaining nodes.
3. ``--lonely`` (default 5): a cluster up 3 whose nodes 1 and 2 are ``kill -9``-ed; then
   SIGTERM to node 3, which has lost its controller (no quorum is left): the time from the
   signal to its log line ``pydmq node 3 stopped`` (same clock: the node's log timestamps).

Only processes this script started are signalled (by PID or by the session it created).

    .venv/bin/python benchmarks/cluster_readiness.py
    .venv/bin/python benchmarks/cluster_readiness.py --rounds 3 --kills 2 --lonely 2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from pydmq.cli.cluster import describe_quorum
from pydmq.client import KafkaClient

_PY = sys.executable


@dataclass
class Up:
    """One ``pydmq cluster up 3`` in its own session."""

    process: subprocess.Popen[str]
    base: int
    data: Path
    started: float
    ready_at: float
    pids: dict[int, int]
    reader: threading.Thread
    output: list[tuple[float, str]]

    def client(self, node: int) -> str:
        return f"127.0.0.1:{self.base + node - 1}"

    @property
    def bootstrap(self) -> str:
        return ",".join(self.client(n) for n in (1, 2, 3))

    @property
    def controllers(self) -> list[str]:
        return [f"127.0.0.1:{self.base + 10 + n}" for n in (0, 1, 2)]

    def ctrl_c(self) -> float:
        """SIGINT to the session (as a terminal's Ctrl-C); the seconds ``cluster up`` reports
        from the signal to the exit of its last node (``stopped in X s``), measured by itself:
        this process may be busy (librdkafka clients being destroyed)."""
        gc.collect()  # destroy finished clients now, not while the cluster stops
        began = time.monotonic()
        os.killpg(self.process.pid, signal.SIGINT)
        self.process.wait(120)
        self.reader.join(10)
        for at, line in self.output:
            found = re.match(r"stopped in ([0-9.]+) s", line.strip())
            if found:
                return float(found.group(1))
            if line.strip() == "stopped":  # before cluster up said how long: read time
                return at - began
        raise RuntimeError("cluster up did not say it stopped:\n" + "".join(self.text()))

    def text(self) -> list[str]:
        return [line for _, line in self.output]


@contextlib.contextmanager
def cluster_up(root: Path) -> Iterator[Up]:
    """A ``cluster up 3`` on random ports below the ephemeral range; a start that fails (a
    port taken meanwhile) is tried again on other ports, twice."""
    for attempt in range(3):
        base = random.randrange(20000, 32000, 20)
        data = Path(tempfile.mkdtemp(prefix=f"c{base}-", dir=root))
        started = time.monotonic()
        process = subprocess.Popen(
            [
                *(_PY, "-m", "pydmq", "cluster", "up", "3", "--data-dir", str(data)),
                *("--base-port", str(base), "--controller-base-port", str(base + 10)),
                *("--http-base-port", "0"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("bootstrap:") or "did not come up" in line:
                break
        ready_at = time.monotonic()
        if lines and lines[-1].startswith("bootstrap:"):
            break
        process.communicate(timeout=120)
        if attempt == 2:
            raise RuntimeError("cluster up failed:\n" + "".join(lines))
    pids = {int(a): int(b) for a, b in re.findall(r"node (\d+): pid (\d+)", "".join(lines))}
    output: list[tuple[float, str]] = []
    reader = threading.Thread(target=_read_lines, args=(process, output), daemon=True)
    reader.start()
    try:
        yield Up(process, base, data, started, ready_at, pids, reader, output)
    finally:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _read_lines(process: subprocess.Popen[str], into: list[tuple[float, str]]) -> None:
    """The rest of ``cluster up``'s output, each line with the time it was read."""
    assert process.stdout is not None
    for line in process.stdout:
        into.append((time.monotonic(), line))


def create_topic(bootstrap: str, name: str, partitions: int) -> tuple[str, float]:
    began = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics([NewTopic(name, partitions, 3)], request_timeout=60)[name]
    try:
        future.result(90)
        outcome = "ok"
    except Exception as exc:  # the figure says what failed
        outcome = f"failed: {exc}"
    return outcome, time.monotonic() - began


def cli(*args: str) -> tuple[int, str]:
    done = subprocess.run([_PY, "-m", "pydmq", *args], capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def leaders(address: str, topic: str) -> dict[int, int]:
    with KafkaClient(address, timeout=2.0) as client:
        info = client.topic(topic, refresh=True)
        return {p: part.leader for p, part in info.partitions.items()}


def wait_new_leaders(address: str, victim: int, partitions: list[int]) -> float | None:
    """When Metadata (from ``address``, asked every 20 ms) first names live leaders other than
    ``victim`` for ``partitions``; None after 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            now = leaders(address, "t")
            if all(now[p] not in (victim, -1) for p in partitions):
                return time.monotonic()
        time.sleep(0.02)
    return None


def wait_registered(address: str, brokers: int) -> None:
    """Until Metadata from ``address`` lists ``brokers`` brokers (30 s at most)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception), KafkaClient(address, timeout=2.0) as client:
            if len(client.refresh_metadata([]).brokers) >= brokers:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{brokers} brokers not registered in 30 s")


def shown_down(status: str, node: int) -> bool:
    """Whether ``cluster status`` output lists ``node`` as down in its Brokers table."""
    rows = [line.split() for line in status.splitlines()]
    return any(row and row[0] == str(node) and ("down" in row or "not" in row) for row in rows)


def summary(name: str, values: list[float], unit: str = "s") -> str:
    if not values:
        return f"{name}: no value"
    values = sorted(values)
    return (
        f"{name}: median {statistics.median(values):.3f} {unit}, min {values[0]:.3f}, "
        f"max {values[-1]:.3f} (n={len(values)})"
    )


# -- parts ----------------------------------------------------------------------------------------


def readiness_rounds(root: Path, rounds: int) -> None:
    start, create, stop, failed = [], [], [], 0
    for i in range(rounds):
        with cluster_up(root) as up:
            outcome, took = create_topic(up.bootstrap, "ready", 3)
            stopped = up.ctrl_c()
        failed += outcome != "ok"
        start.append(up.ready_at - up.started)
        create.append(took)
        stop.append(stopped)
        print(
            f"round {i + 1}: bootstrap line after {start[-1]:.2f} s; CreateTopics RF=3 "
            f"{outcome} in {took * 1000:.0f} ms; Ctrl-C stopped it in {stopped:.2f} s",
            flush=True,
        )
    print(summary("cluster up to the bootstrap line", start))
    print(summary("bootstrap line to a created RF=3 topic", create))
    print(summary("Ctrl-C to exit", stop))
    print(f"CreateTopics failures: {failed} of {rounds}")


class AckedWriter:
    """acks=all writes of one record per partition every ~5 ms, on a thread of its own;
    ``acked`` holds (partition, enqueued, acknowledged) monotonic times."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.topic = topic
        self.partitions = partitions
        self.acked: list[tuple[int, float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for partition in range(self.partitions):
                self.producer.produce(
                    self.topic, b"x", partition=partition, on_delivery=self._report(partition)
                )
            self.producer.poll(0.005)
            time.sleep(0.005)
        self.producer.flush(60)

    def _report(self, partition: int) -> Callable[[object, object], None]:
        sent = time.monotonic()

        def report(err: object, msg: object) -> None:
            if err is None:
                self.acked.append((partition, sent, time.monotonic()))

        return report

    def close(self) -> None:
        self.stop.set()
        self.thread.join(90)

    def stall(self, since: float, until: float, partitions: Collection[int]) -> float:
        """The longest delivery latency of a record to ``partitions`` enqueued in
        [since, until]."""
        return max(
            (a - s for p, s, a in self.acked if p in partitions and since <= s <= until),
            default=0.0,
        )


def kill_rounds(root: Path, kills: int) -> None:
    moved, stalls, other_stalls, stops = [], [], [], []
    for i in range(kills):
        with cluster_up(root) as up:
            outcome, _ = create_topic(up.bootstrap, "t", 6)
            quorum, note = describe_quorum(up.controllers, 5.0)
            if outcome != "ok" or quorum is None:
                print(f"kill round {i + 1}: skipped ({outcome}, {note})")
                continue
            victim = quorum.topics[0].partitions[0].leader_id
            live = next(n for n in (1, 2, 3) if n != victim)
            led = [p for p, leader in leaders(up.client(live), "t").items() if leader == victim]
            if not led:
                print(f"kill round {i + 1}: skipped (controller {victim} leads nothing)")
                continue
            writer = AckedWriter(up.client(live), "t", 6)
            time.sleep(2.0)
            killed = time.monotonic()
            os.kill(up.pids[victim], signal.SIGKILL)
            with ThreadPoolExecutor(1) as pool:
                watch = pool.submit(wait_new_leaders, up.client(live), victim, led)
                describe_rc, _ = cli("topics", "describe", "t", "-b", up.client(live))
                status_rc, status = cli("cluster", "status", "-b", up.client(live))
                new_leader_at = watch.result(60)
            time.sleep(max(0.0, killed + 12 - time.monotonic()))
            writer.close()
            stall = writer.stall(killed - 1.0, killed + 5.0, led)
            others = writer.stall(killed - 1.0, killed + 5.0, set(range(6)) - set(led))
            stops.append(up.ctrl_c())
        if new_leader_at is not None:
            moved.append(new_leader_at - killed)
        stalls.append(stall)
        other_stalls.append(others)
        took = "-" if new_leader_at is None else f"{new_leader_at - killed:.3f} s"
        print(
            f"kill round {i + 1}: node {victim} (active controller, leader of {led}) killed; "
            f"new leaders in Metadata after {took}; acks=all stall {stall:.2f} s (other "
            f"partitions {others:.2f} s); describe "
            f"right after: rc {describe_rc}; status right after: rc {status_rc}, dead node "
            f"shown down: {shown_down(status, victim)}; Ctrl-C of the rest {stops[-1]:.2f} s",
            flush=True,
        )
    print(summary("kill -9 to new leaders in Metadata", moved))
    print(summary("acks=all stall on the dead leader's partitions", stalls))
    print(summary("acks=all stall on the other partitions (same producer)", other_stalls))
    print(summary("Ctrl-C with one node dead", stops))


def _log_time(line: str) -> float:
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


def lonely_rounds(root: Path, rounds: int) -> None:
    took = []
    for i in range(rounds):
        with cluster_up(root) as up:
            wait_registered(up.client(3), 3)  # so that node 3 has a controlled shutdown to do
            for node in (1, 2):
                os.kill(up.pids[node], signal.SIGKILL)
            time.sleep(0.5)
            signalled = time.time()
            os.kill(up.pids[3], signal.SIGTERM)
            log = up.data / "node-3.log"
            deadline = time.monotonic() + 60
            stopped = None
            while stopped is None and time.monotonic() < deadline:
                for line in log.read_text(errors="replace").splitlines():
                    if "pydmq node 3 stopped" in line:
                        stopped = _log_time(line)
                time.sleep(0.05)
            up.ctrl_c()
        if stopped is not None:
            took.append(stopped - signalled)
        print(
            f"lonely round {i + 1}: node 3 stopped "
            f"{'-' if stopped is None else f'{stopped - signalled:.3f} s'} after SIGTERM",
            flush=True,
        )
    print(summary("SIGTERM to stop of a node whose controller is gone", took))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--lonely", type=int, default=5)
    parser.add_argument("--data-dir", help="keep the nodes' data and logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pydmq-readiness-") as tmp:
        root = Path(args.data_dir or tmp)
        root.mkdir(parents=True, exist_ok=True)
        if args.rounds:
            readiness_rounds(root, args.rounds)
        if args.kills:
            kill_rounds(root, args.kills)
        if args.lonely:
            lonely_rounds(root, args.lonely)


if __name__ == "__main__":
    main()
