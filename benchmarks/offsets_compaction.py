"""``__consumer_offsets`` stays small under a flood of offset commits, and loads fast.

The proof figure of issue 17: ``pydmq serve`` with ``offsets.topic.segment.bytes`` at 1 MiB
(Kafka's default is 100 MiB) and one ``__consumer_offsets`` partition receives ``--commits``
OffsetCommit requests (v8) of one group, each committing ``--partitions`` partitions of one
topic, over the real wire: a raw pipelined client keeps ``--window`` requests in flight on one
connection (a Kafka client's commits would cost more client CPU than the broker's on 2 cores).
Every ``--report-every`` commits it prints the commit rate, the partition's size on disk, its
segment files and the cleaner's passes so far (the broker's ``cleaned __consumer_offsets-0``
log lines). Then the broker is stopped (SIGTERM) and started again on the same data, and the
time from the exec to an OffsetFetch answering the last committed offsets is printed (the
group's shard must have replayed its partition by then), with the time to listening. Then the
same flood goes to the reference Kafka 4.4 (compat/kafka) with the same three settings, whose
``__consumer_offsets-0`` is measured the same way (``--broker`` picks one).

    python benchmarks/offsets_compaction.py                      # 1,000,000 commits
    python benchmarks/offsets_compaction.py --commits 50000 --report-every 10000
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import (  # noqa: E402
    CHILD_ENV,
    free_port,
    serve_command,
    single_node,
    wait_listening,
)

from pydmq.protocol.errors import ErrorCode  # noqa: E402
from pydmq.protocol.framing import SIZE, encode_request_frame  # noqa: E402
from pydmq.protocol.headers import parse_response_header  # noqa: E402
from pydmq.protocol.messages import create_topics as ct  # noqa: E402
from pydmq.protocol.messages import find_coordinator as fc  # noqa: E402
from pydmq.protocol.messages import offset_commit as oc  # noqa: E402
from pydmq.protocol.messages import offset_fetch as of  # noqa: E402

GROUP = "bench-group"
TOPIC = "bench-topic"
COMMIT_VERSION = 8
FETCH_VERSION = 7
PARTITION_DIR = "__consumer_offsets-0"


class PipelinedClient:
    """One blocking loopback connection that sends requests in windows and reads their
    responses in order (owned by the benchmark's thread)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def frame(self, api_key: int, version: int, request: object) -> bytes:
        self.correlation_id += 1
        return bytes(encode_request_frame(api_key, version, request, self.correlation_id, "b"))

    def exchange(self, frames: list[bytes]) -> list[bytes]:
        """Send ``frames`` at once; their response frames (without size prefixes)."""
        self.sock.sendall(b"".join(frames))
        return [self._read_frame() for _ in frames]

    def _read_frame(self) -> bytes:
        (size,) = SIZE.unpack(self._read_exactly(SIZE.size))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        self.sock.close()


def create_topic(client: PipelinedClient, partitions: int) -> None:
    """Create the committed topic (OffsetCommit refuses partitions of unknown topics)."""
    topic = ct.CreatableTopic(name=TOPIC, num_partitions=partitions, replication_factor=1)
    request = ct.CreateTopicsRequest(topics=[topic], timeout=30_000)
    (frame,) = client.exchange([client.frame(ct.API_KEY, 7, request)])
    response = ct.decode_response(parse_response_header(frame, ct.API_KEY, 7), 7)
    if any(t.error_code for t in response.topics):
        raise RuntimeError(f"CreateTopics failed: {response.topics}")


def wait_coordinator(client: PipelinedClient, timeout_s: float = 60.0) -> None:
    """FindCoordinator until the group has one (Kafka creates ``__consumer_offsets`` on the
    first FindCoordinator and answers NOT_COORDINATOR to commits until its leader is up)."""
    deadline = time.monotonic() + timeout_s
    request = fc.FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP])
    while True:
        (frame,) = client.exchange([client.frame(fc.API_KEY, 4, request)])
        response = fc.decode_response(parse_response_header(frame, fc.API_KEY, 4), 4)
        if all(c.error_code == ErrorCode.NONE for c in response.coordinators):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no coordinator for {GROUP}: {response.coordinators}")
        time.sleep(0.2)


def commit_request(offset: int, partitions: int) -> oc.OffsetCommitRequest:
    """A commit of ``offset`` to every partition, as a client outside group management."""
    return oc.OffsetCommitRequest(
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            oc.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[
                    oc.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
                    for p in range(partitions)
                ],
            )
        ],
    )


def check_commit(frame: bytes) -> None:
    response = oc.decode_response(
        parse_response_header(frame, oc.API_KEY, COMMIT_VERSION), COMMIT_VERSION
    )
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code != ErrorCode.NONE:
                raise RuntimeError(f"commit failed: {ErrorCode(partition.error_code).name}")


def fetch_offsets(client: PipelinedClient, partitions: int) -> dict[int, int] | None:
    """The committed offsets of the group, or None while its partition loads."""
    request = of.OffsetFetchRequest(
        group_id=GROUP,
        topics=[of.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=list(range(partitions)))],
    )
    (frame,) = client.exchange([client.frame(of.API_KEY, FETCH_VERSION, request)])
    response = of.decode_response(
        parse_response_header(frame, of.API_KEY, FETCH_VERSION), FETCH_VERSION
    )
    if response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        return None
    if response.error_code != ErrorCode.NONE:
        raise RuntimeError(f"OffsetFetch failed: {ErrorCode(response.error_code).name}")
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def disk_usage(directory: Path) -> tuple[int, int]:
    """(bytes of the segment files, number of segment files) of a partition directory."""
    size = files = 0
    for path in directory.glob("*.log*"):
        try:
            size += path.stat().st_size
            files += 1
        except FileNotFoundError:  # a swap removed it meanwhile
            continue
    return size, files


def cleanings(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count(f"cleaned {PARTITION_DIR} ")


def start(
    data: Path, log_path: Path, overrides: dict[str, str]
) -> tuple[subprocess.Popen[bytes], int, float]:
    port = free_port()
    command = [
        *serve_command(),
        "serve",
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port}",
        "--log-dirs",
        str(data),
        "--http-listener",
        "http://127.0.0.1:0",
        "--log-level",
        "INFO",
    ]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    out = open(log_path, "ab")  # noqa: SIM115 - the child keeps writing to it
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=CHILD_ENV, stdout=out, stderr=out)
    out.close()
    return proc, port, started


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def flood(port: int, partition_dir: Path, log_path: Path | None, args: argparse.Namespace) -> None:
    """Create the topic, send the commits, print sizes as they go and the peak."""
    client = PipelinedClient(port)
    create_topic(client, args.partitions)
    wait_coordinator(client)
    sent = last_sent = peak = 0
    begun = last_time = time.perf_counter()
    while sent < args.commits:
        n = min(args.window, args.commits - sent)
        frames = [
            client.frame(oc.API_KEY, COMMIT_VERSION, commit_request(sent + i, args.partitions))
            for i in range(n)
        ]
        for frame in client.exchange(frames):
            check_commit(frame)
        sent += n
        if sent % args.report_every < n or sent == args.commits:
            now = time.perf_counter()
            size, files = disk_usage(partition_dir)
            peak = max(peak, size)
            passes = "" if log_path is None else f", {cleanings(log_path)} cleanings"
            print(
                f"{now - begun:7.1f} s {sent:>10,} commits "
                f"({(sent - last_sent) / (now - last_time):7,.0f}/s): "
                f"{size / 2**20:6.2f} MiB in {files} segment files{passes}",
                flush=True,
            )
            last_time, last_sent = now, sent
    client.close()
    total = time.perf_counter() - begun
    print(
        f"committed {sent:,} in {total:.1f} s ({sent / total:,.0f}/s); peak {peak / 2**20:.2f} MiB"
    )
    time.sleep(args.settle_s)  # let the cleaner's next pass run
    size, files = disk_usage(partition_dir)
    print(f"after {args.settle_s:.0f} s idle: {size / 2**20:.2f} MiB in {files} segment files")


def overrides(args: argparse.Namespace) -> dict[str, str]:
    return {
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": str(args.segment_bytes),
        "log.cleaner.backoff.ms": str(args.backoff_ms),
    }


def run_kafka(args: argparse.Namespace) -> None:
    """The same flood on the reference Kafka (compat/kafka), with the same three settings."""
    workdir = Path(tempfile.mkdtemp(prefix="kafka-offsets-bench-"))
    try:
        with single_node("kafka", workdir, overrides(args)) as bootstrap:
            port = int(bootstrap.rpartition(":")[2])
            deadline = time.monotonic() + 120
            while True:  # the JVM takes a while: retry the connection
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            # single_node's data dir for Kafka; start.sh puts log.dirs in its logs/
            (data,) = [d for d in workdir.iterdir() if d.is_dir()]
            print("Kafka 4.4:")
            flood(port, data / "logs" / PARTITION_DIR, None, args)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_pydmq(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="pydmq-offsets-bench-"))
    data, log_path = root / "data", root / "broker.log"
    proc, port, started = start(data, log_path, overrides(args))
    try:
        wait_listening(proc, port, started, 0.05)
        print("pydmq:")
        flood(port, data / PARTITION_DIR, log_path, args)
        stop(proc)
        expected = {p: args.commits - 1 for p in range(args.partitions)}
        proc, port, started = start(data, log_path, overrides(args))
        listening = wait_listening(proc, port, started, 0.005)
        client = PipelinedClient(port)
        while (answer := fetch_offsets(client, args.partitions)) is None:
            time.sleep(0.005)
        served = time.perf_counter() - started
        client.close()
        if answer != expected:
            raise RuntimeError(f"read back {answer}, expected {expected}")
        print(
            f"restart: listening after {listening * 1000:.0f} ms, OffsetFetch answered the "
            f"last committed offsets {served * 1000:.0f} ms after the exec"
        )
    finally:
        if proc.poll() is None:
            stop(proc)
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4, help="partitions per commit")
    parser.add_argument("--window", type=int, default=64, help="requests in flight")
    parser.add_argument("--segment-bytes", type=int, default=1 << 20)
    parser.add_argument("--backoff-ms", type=int, default=15_000, help="log.cleaner.backoff.ms")
    parser.add_argument("--report-every", type=int, default=50_000)
    parser.add_argument("--settle-s", type=float, default=20.0, help="idle time before restart")
    parser.add_argument("--keep", action="store_true", help="keep the data and broker log")
    parser.add_argument(
        "--broker", choices=("pydmq", "kafka", "both"), default="both", help="which to flood"
    )
    args = parser.parse_args()
    print(
        f"{args.commits:,} commits of {args.partitions} partitions, window {args.window}, "
        f"offsets.topic.segment.bytes={args.segment_bytes}, "
        f"log.cleaner.backoff.ms={args.backoff_ms}"
    )
    if args.broker in ("pydmq", "both"):
        run_pydmq(args)
    if args.broker in ("kafka", "both"):
        run_kafka(args)


if __name__ == "__main__":
    main()
