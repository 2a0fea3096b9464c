"""Cluster failover and replication-cost benchmark on a 3-node loopback pydmq cluster.

Starts three combined broker+controller nodes (``pydmq.testing.cluster.ClusterProcess``) and,
in one run:

1. Throughput: produces ``--records`` 100-byte records with confluent-kafka to an RF=3 topic
   with acks=all (min.insync.replicas=2) and to an RF=1 topic with acks=1, both led by the same
   node; reports records/s, MB/s and delivery latency p50/p99 (delivery report minus enqueue,
   one probe per 1000 records) and the RF3/RF1 ratio.
2. Leader failover: RF=3, min.insync.replicas=2, 1 partition; a paced confluent-kafka
   producer (acks=all, enable.idempotence=true, linger.ms=1) sends continuously with delivery
   reports while the partition leader (from Metadata) is ``kill -9``-ed ``--kills`` times.
   Per kill: time from the kill to the first acknowledgement of any record, to the first
   acknowledgement of a record enqueued after the kill, and to Metadata naming a new leader;
   then the node is restarted and the benchmark waits until the ISR is full again. "First ack
   of any record" can be ~0 ms when an acknowledgement was already on its way at the kill; the
   gap between "Metadata names a new leader" (the cluster's part: broker session timeout, plus
   a Raft election when the leader was also the active controller) and the first ack of a new
   record is the client's: librdkafka re-reads metadata of unavailable partitions on a 1 s
   timer.
3. Controller failover: ``--controller-kills`` times the active controller (Metadata
   controller_id, cross-checked with DescribeQuorum) is ``kill -9``-ed; the time until a
   CreateTopics of a fresh topic sent to a surviving node (forwarded to the controller)
   succeeds (overlapping attempts for one name, one started every 100 ms; NONE or
   TOPIC_ALREADY_EXISTS count as success); then the node is restarted and
   the benchmark waits for 3 brokers.

Only the node processes this script started are signalled; every wait is bounded. Node logs
are copied to ``--log-dir`` (default build/cluster-failover-logs) before clean-up, and their
WARNING/ERROR lines are summarised at the end. Figures are printed; nothing is asserted.

    .venv/bin/python benchmarks/cluster_failover.py            # 10 leader kills, 5 controller kills, 300,000 records
    .venv/bin/python benchmarks/cluster_failover.py --quick    # 3 leader kills, 2 controller kills, 100,000 records
    .venv/bin/python benchmarks/cluster_failover.py --session-timeout-ms 9000 --heartbeat-ms 2000
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from pydmq.cli.cluster import describe_quorum
from pydmq.client import KafkaClient, error_name
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.testing.cluster import ClusterProcess

REPO = Path(__file__).resolve().parents[1]
NAN = float("nan")
if str(REPO) not in sys.path:  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(REPO))

from benchmarks.common import DeliveryTally, bulk_producer_config, produce_chunked  # noqa: E402

# -- helpers --------------------------------------------------------------------------------------


def add_note(row: dict[str, Any], text: str) -> None:
    """Append ``text`` to a kill round's ``note`` ("; " between): a round that misses a wait
    records why and goes on, and the note says whether the cluster recovered."""
    row["note"] = (row.get("note", "") + f"; {text}").lstrip("; ")


def note_suffix(row: dict[str, Any]) -> str:
    """`` [note]`` for a kill round's printed line; empty when the round went cleanly."""
    return f" [{row['note']}]" if row.get("note") else ""


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``; NaN when empty."""
    data = sorted(v for v in values if v == v)
    if not data:
        return NAN
    return data[min(len(data) - 1, int(q * len(data)))]


def p50(values: Sequence[float]) -> float:
    data = [v for v in values if v == v]
    return statistics.median(data) if data else NAN


def vmax(values: Sequence[float]) -> float:
    data = [v for v in values if v == v]
    return max(data) if data else NAN


def finite(value: Any) -> Any:
    """``value`` with every NaN replaced by None (for strict JSON)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def ms(seconds: float | None) -> float:
    return NAN if seconds is None else seconds * 1000


def wait_until(
    what: str, check: Callable[[], bool], timeout: float, interval: float = 0.05
) -> float:
    """Poll ``check`` until True; seconds it took. TimeoutError names ``what``."""
    start = time.perf_counter()
    last: BaseException | None = None
    while True:
        try:
            if check():
                return time.perf_counter() - start
        except Exception as exc:  # a node refusing connections while it starts or dies
            last = exc
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{what} not reached in {timeout:.0f} s (last error: {last!r})")
        time.sleep(interval)


def running_addresses(cluster: ClusterProcess) -> list[str]:
    return [cluster.node(i).bootstrap for i in cluster.running()]


def metadata(
    cluster: ClusterProcess, topic: str
) -> tuple[int, list[int], dict[int, tuple[int, list[int], list[int]]]]:
    """(controller id, broker ids, {partition: (leader, replicas, isr)}) from a running node."""
    with KafkaClient(running_addresses(cluster), timeout=2.0) as client:
        response = client.refresh_metadata([topic])
        parts: dict[int, tuple[int, list[int], list[int]]] = {}
        for t in response.topics:
            if t.name == topic:
                for p in t.partitions:
                    parts[p.partition_index] = (
                        p.leader_id,
                        list(p.replica_nodes),
                        list(p.isr_nodes),
                    )
        return response.controller_id, sorted(b.node_id for b in response.brokers), parts


def quorum_leader(cluster: ClusterProcess) -> int:
    """The Raft leader of __cluster_metadata per DescribeQuorum (-1 if none answers)."""
    addresses = [cluster.node(i).controller_address for i in cluster.running()]
    response, _ = describe_quorum(addresses, timeout=2.0)
    if response is None:
        return -1
    return response.topics[0].partitions[0].leader_id


def create_topic(
    cluster: ClusterProcess, topic: str, assignment: list[int], config: dict[str, str]
) -> None:
    """Create a 1-partition topic on ``assignment`` (first = preferred leader); wait until it
    is led by the first replica with a full ISR."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, 1, replica_assignment=[assignment], config=config)], request_timeout=15
    )
    futures[topic].result(20)

    def ready() -> bool:
        _, _, parts = metadata(cluster, topic)
        return 0 in parts and parts[0][0] >= 0 and len(parts[0][2]) == len(assignment)

    wait_until(f"{topic} led with a full ISR", ready, timeout=30)


def full_isr(cluster: ClusterProcess, topic: str) -> bool:
    _, brokers, parts = metadata(cluster, topic)
    return len(brokers) == 3 and 0 in parts and parts[0][0] >= 0 and len(parts[0][2]) == 3


def high_watermark(cluster: ClusterProcess, topic: str) -> int:
    with KafkaClient(running_addresses(cluster), timeout=5.0) as client:
        return client.list_offsets(topic, {0: -1})[0][0]


# -- 1. throughput --------------------------------------------------------------------------------


def produce_bulk(bootstrap: str, topic: str, count: int, size: int, acks: str) -> dict[str, float]:
    """As fast as librdkafka goes (produce_batch, one latency probe per 1000 records)."""
    payloads = [bytes([65 + i % 26]) * size for i in range(64)]
    producer = ck.Producer({**bulk_producer_config(bootstrap, acks), "message.timeout.ms": 120_000})
    tally = DeliveryTally()
    producer.produce(topic, b"warmup", partition=0, on_delivery=tally.on_delivery)
    producer.flush(30)
    left, elapsed = produce_chunked(producer, topic, payloads, count, tally, flush_timeout=180)
    return {
        "records": count,
        "records_s": count / elapsed,
        "mb_s": count * size / elapsed / 1e6,
        "p50_ms": ms(p50(tally.latencies)),
        "p99_ms": ms(pct(tally.latencies, 0.99)),
        "errors": tally.errors + left,
        "seconds": elapsed,
    }


# -- 2. leader failover ---------------------------------------------------------------------------


class PacedProducer(threading.Thread):
    """Sends ``rate`` records/s (value = 10-digit sequence number, padded to ``size``) with
    acks=all and idempotence until stopped; time-stamps delivery reports against an armed kill."""

    def __init__(self, bootstrap: str, topic: str, rate: float, size: int = 100) -> None:
        super().__init__(daemon=True, name="paced-producer")
        self.topic = topic
        self.interval = 1.0 / rate
        self.size = size
        self.client_errors: list[str] = []
        self.producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 1,
                "message.timeout.ms": 120_000,
                "error_cb": lambda e: self.client_errors.append(f"{time.perf_counter():.3f} {e}"),
            }
        )
        self.stop_event = threading.Event()
        self.next_seq = 0  # incremented before produce(): seq >= a value read now is enqueued later
        self.acked = 0
        self.failed: list[str] = []
        self.last_ack = 0.0
        self.max_gap = 0.0  # longest time between two consecutive acks while armed
        # Armed window (written by the main thread, read by the delivery callback).
        self.armed = False
        self.armed_at = 0.0
        self.boundary = 1 << 62
        self.first_any: float | None = None
        self.first_new: float | None = None
        self.flushed_left = -1

    def arm(self, at: float) -> None:
        self.first_any = None
        self.first_new = None
        self.boundary = 1 << 62
        self.armed_at = at
        self.max_gap = 0.0
        self.armed = True

    def set_boundary(self) -> None:
        self.boundary = self.next_seq

    def _report(self, err: Any, msg: ck.Message) -> None:
        now = time.perf_counter()
        if err is not None:
            self.failed.append(f"{now:.3f} {err}")
            return
        self.acked += 1
        if self.armed and now >= self.armed_at:
            if self.first_any is None:
                self.first_any = now
            if self.first_new is None:
                value = msg.value()
                if value is not None and int(value[:10]) >= self.boundary:
                    self.first_new = now
            self.max_gap = max(self.max_gap, now - max(self.last_ack, self.armed_at))
        self.last_ack = now

    def run(self) -> None:
        pad = b"x" * max(0, self.size - 10)
        next_t = time.perf_counter()
        while not self.stop_event.is_set():
            now = time.perf_counter()
            if now >= next_t:
                seq = self.next_seq
                self.next_seq = seq + 1
                while not self.stop_event.is_set():
                    try:
                        self.producer.produce(
                            self.topic, b"%010d" % seq + pad, partition=0, on_delivery=self._report
                        )
                        break
                    except BufferError:
                        self.producer.poll(0.01)
                # Behind schedule (a stalled thread): do not burst to catch up.
                next_t = max(next_t + self.interval, now - 0.05)
                self.producer.poll(0)
            else:
                self.producer.poll(min(0.002, next_t - now))
        self.flushed_left = self.producer.flush(60)


def leader_failover(
    cluster: ClusterProcess, kills: int, rate: float, timeout: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    controller, _, _ = metadata(cluster, topic)
    first = next(i for i in sorted(cluster.nodes) if i != controller)
    others = [i for i in sorted(cluster.nodes) if i != first]
    create_topic(cluster, topic, [first, *others], {"min.insync.replicas": "2"})
    producer = PacedProducer(cluster.bootstrap, topic, rate)
    producer.start()
    rows: list[dict[str, Any]] = []
    try:
        wait_until("first 500 acks", lambda: producer.acked >= 500, timeout=30)
        for k in range(kills):
            controller, _, parts = metadata(cluster, topic)
            leader = parts[0][0]
            row: dict[str, Any] = {
                "kill": k + 1,
                "leader": leader,
                "was_controller": leader == controller,
            }
            rows.append(row)
            producer.arm(time.perf_counter())
            t_kill = time.perf_counter()
            cluster.kill(leader, signal.SIGKILL)  # waits (bounded) for the process to exit
            producer.set_boundary()
            row["kill_ms"] = ms(time.perf_counter() - t_kill)
            new_leader_at: float | None = None
            deadline = t_kill + timeout
            next_meta = 0.0
            while time.perf_counter() < deadline and (
                producer.first_new is None or new_leader_at is None
            ):
                now = time.perf_counter()
                if new_leader_at is None and now >= next_meta:
                    next_meta = now + 0.05
                    try:
                        _, _, now_parts = metadata(cluster, topic)
                        if now_parts[0][0] not in (-1, leader):
                            new_leader_at = time.perf_counter()
                            row["new_leader"] = now_parts[0][0]
                    except Exception:
                        pass
                time.sleep(0.005)
            row["first_ack_any_ms"] = ms(
                None if producer.first_any is None else producer.first_any - t_kill
            )
            row["first_ack_new_ms"] = ms(
                None if producer.first_new is None else producer.first_new - t_kill
            )
            row["metadata_leader_ms"] = ms(
                None if new_leader_at is None else new_leader_at - t_kill
            )
            row["max_ack_gap_ms"] = ms(producer.max_gap)
            if producer.first_new is None:
                row["note"] = f"no ack of a new record within {timeout:.0f} s"
            t_restart = time.perf_counter()
            cluster.start_node(leader, timeout=60)
            row["restart_listen_s"] = time.perf_counter() - t_restart
            try:
                wait_until(
                    "ISR full again",
                    lambda: full_isr(cluster, topic),
                    timeout=timeout,
                    interval=0.1,
                )
                row["isr_full_s"] = time.perf_counter() - t_restart
            except TimeoutError as exc:
                row["isr_full_s"] = NAN
                add_note(row, str(exc))
            producer.armed = False
            acked = producer.acked
            try:
                wait_until(
                    "acks flowing", lambda a=acked: producer.acked >= a + int(rate), timeout=timeout
                )
            except TimeoutError as exc:
                add_note(row, str(exc))
            print(
                f"  leader kill {k + 1}/{kills}: node {leader}"
                f"{' (also controller)' if row['was_controller'] else ''} -> "
                f"{row.get('new_leader', '?')}; first ack {row['first_ack_any_ms']:.0f} ms, "
                f"first ack of a new record {row['first_ack_new_ms']:.0f} ms, metadata leader "
                f"{row['metadata_leader_ms']:.0f} ms; restart {row['restart_listen_s']:.1f} s, "
                f"ISR full after {row['isr_full_s']:.1f} s{note_suffix(row)}",
                flush=True,
            )
            if "note" in row and not full_isr_safe(cluster, topic):
                print("  cluster did not recover; stopping the leader-failover section", flush=True)
                break
            time.sleep(0.5)
    finally:
        producer.armed = False
        producer.stop_event.set()
        producer.join(90)
        if not producer.is_alive():
            del producer.producer  # break the error_cb cycle: destroy the client now
    stats = {
        "topic": topic,
        "sent": producer.next_seq,
        "acked": producer.acked,
        "failed": len(producer.failed),
        "failed_examples": producer.failed[:5],
        "client_errors": producer.client_errors[:10],
        "unflushed": producer.flushed_left,
    }
    return rows, stats


def full_isr_safe(cluster: ClusterProcess, topic: str) -> bool:
    try:
        return full_isr(cluster, topic)
    except Exception:
        return False


# -- 3. controller failover -----------------------------------------------------------------------


def try_create(addresses: list[str], name: str, timeout: float) -> str:
    """CreateTopics of one RF=1 topic through the first reachable address; the error name."""
    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=name, num_partitions=1, replication_factor=1)],
        timeout=int(timeout * 1000),
    )
    with KafkaClient(addresses, timeout=timeout + 1.0) as client:
        response = client.call(request, CreateTopicsResponse)
    return error_name(response.topics[0].error_code) if response.topics[0].error_code else "NONE"


def controller_failover(
    cluster: ClusterProcess, kills: int, timeout: float, attempt_every: float = 0.1
) -> list[dict[str, Any]]:
    """Per kill, CreateTopics attempts start every ``attempt_every`` s, overlapping (each may
    wait up to 2 s for its forwarded answer), so the time of the first success does not
    depend on one attempt's timeout."""
    rows: list[dict[str, Any]] = []
    for k in range(kills):
        controller, _, _ = metadata(cluster, "__none__")
        raft_leader = quorum_leader(cluster)
        row: dict[str, Any] = {"kill": k + 1, "controller": controller, "raft_leader": raft_leader}
        rows.append(row)
        if controller not in cluster.nodes:
            row["note"] = f"no active controller in Metadata ({controller})"
            print(f"  controller kill {k + 1}: {row['note']}", flush=True)
            break
        if raft_leader != controller:
            row["note"] = f"Metadata says {controller}, DescribeQuorum says {raft_leader}"
        t_kill = time.perf_counter()
        cluster.kill(controller, signal.SIGKILL)
        survivors = running_addresses(cluster)
        attempts: dict[str, int] = {}
        done_at: float | None = None

        # One name per kill: the first attempt that commits answers NONE, any later one
        # TOPIC_ALREADY_EXISTS (also an answer of an active controller), and only one topic
        # is created however many attempts were in flight.
        name = f"ctl-{k}-{uuid.uuid4().hex[:6]}"

        def attempt(survivors: list[str] = survivors, name: str = name) -> tuple[str, float]:
            try:
                code = try_create(survivors, name, timeout=2.0)
            except Exception as exc:
                code = type(exc).__name__
            return code, time.perf_counter()

        pool = ThreadPoolExecutor(max_workers=40, thread_name_prefix="create-topics")
        pending: set[Future[tuple[str, float]]] = set()
        next_start = t_kill
        try:
            while done_at is None and time.perf_counter() - t_kill < timeout:
                if time.perf_counter() >= next_start:
                    pending.add(pool.submit(attempt))
                    next_start += attempt_every
                finished, pending = wait(
                    pending,
                    timeout=max(0.0, next_start - time.perf_counter()),
                    return_when=FIRST_COMPLETED,
                )
                for f in finished:
                    code, at = f.result()
                    attempts[code] = attempts.get(code, 0) + 1
                    if code in ("NONE", "TOPIC_ALREADY_EXISTS") and (
                        done_at is None or at < done_at
                    ):
                        done_at = at
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # at most one attempt's timeout
        row["create_ok_ms"] = ms(None if done_at is None else done_at - t_kill)
        row["attempts"] = attempts
        try:
            new_controller, _, _ = metadata(cluster, "__none__")
        except Exception:
            new_controller = -1
        row["new_controller"] = new_controller
        row["new_raft_leader"] = quorum_leader(cluster)
        t_restart = time.perf_counter()
        cluster.start_node(controller, timeout=60)
        row["restart_listen_s"] = time.perf_counter() - t_restart
        try:
            cluster.wait_for_brokers(3, timeout=timeout)
            row["three_brokers_s"] = time.perf_counter() - t_restart
        except TimeoutError as exc:
            row["three_brokers_s"] = NAN
            add_note(row, str(exc))
        print(
            f"  controller kill {k + 1}/{kills}: node {controller} (raft leader {raft_leader}) -> "
            f"{row['new_controller']} (raft leader {row['new_raft_leader']}); CreateTopics ok "
            f"after {row['create_ok_ms']:.0f} ms (attempts {attempts}); restart "
            f"{row['restart_listen_s']:.1f} s, 3 brokers after {row['three_brokers_s']:.1f} s"
            f"{note_suffix(row)}",
            flush=True,
        )
        if row["three_brokers_s"] != row["three_brokers_s"]:
            print("  cluster did not recover; stopping the controller-failover section", flush=True)
            break
        time.sleep(1.0)
    return rows


# -- logs -----------------------------------------------------------------------------------------

_NOTABLE = re.compile(r"\b(WARNING|WARN|ERROR|CRITICAL|Traceback)\b")


def keep_logs(cluster: ClusterProcess, log_dir: Path) -> dict[int, dict[str, Any]]:
    """Copy each node's log to ``log_dir``; count and sample its WARNING/ERROR lines."""
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[int, dict[str, Any]] = {}
    for node_id, node in cluster.nodes.items():
        if not node.log_path.exists():
            continue
        target = log_dir / f"node-{node_id}.log"
        shutil.copy(node.log_path, target)
        counts: dict[str, int] = {}
        samples: list[str] = []
        for line in target.read_text(errors="replace").splitlines():
            m = _NOTABLE.search(line)
            if m:
                counts[m.group(1)] = counts.get(m.group(1), 0) + 1
                if len(samples) < 12 and (m.group(1) != "WARNING" or len(samples) < 4):
                    samples.append(line[:300])
        summary[node_id] = {"counts": counts, "samples": samples}
    return summary


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=10, help="partition-leader kill -9 rounds")
    parser.add_argument("--controller-kills", type=int, default=5, help="controller kill -9 rounds")
    parser.add_argument("--records", type=int, default=300_000, help="records per throughput run")
    parser.add_argument("--size", type=int, default=100, help="record size for throughput (bytes)")
    parser.add_argument(
        "--quick", action="store_true", help="3 kills, 2 controller kills, 100,000 records"
    )
    parser.add_argument(
        "--rate", type=float, default=2000, help="paced producer records/s (failover)"
    )
    parser.add_argument(
        "--session-timeout-ms", type=int, default=1000, help="broker.session.timeout.ms"
    )
    parser.add_argument(
        "--heartbeat-ms", type=int, default=250, help="broker.heartbeat.interval.ms"
    )
    parser.add_argument("--timeout", type=float, default=60, help="bound of every wait (s)")
    parser.add_argument("--log-dir", default=str(REPO / "build" / "cluster-failover-logs"))
    args = parser.parse_args()
    if args.quick:
        args.kills, args.controller_kills, args.records = 3, 2, 100_000

    node_config: dict[str, object] = {
        "broker.session.timeout.ms": args.session_timeout_ms,
        "broker.heartbeat.interval.ms": args.heartbeat_ms,
        "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 100,
        "offsets.topic.replication.factor": 3,
        "group.initial.rebalance.delay.ms": 0,
    }
    print(f"node config: {node_config}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="pydmq-failover-"))
    cluster = ClusterProcess(3, root, node_config)
    results: dict[str, Any] = {}
    leader_rows: list[dict[str, Any]] = []
    leader_stats: dict[str, Any] = {}
    ctl_rows: list[dict[str, Any]] = []
    logs: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()
    try:
        t0 = time.perf_counter()
        cluster.start(timeout=60)
        cluster.wait_for_brokers(3, timeout=60)
        print(f"cluster up (3 brokers in Metadata) in {time.perf_counter() - t0:.1f} s", flush=True)

        # 1. throughput: RF=3 acks=all vs RF=1 acks=1, both led by the same non-controller node.
        controller, _, _ = metadata(cluster, "__none__")
        lead = next(i for i in sorted(cluster.nodes) if i != controller)
        rest = [i for i in sorted(cluster.nodes) if i != lead]
        tag = uuid.uuid4().hex[:6]
        create_topic(cluster, f"tp-rf3-{tag}", [lead, *rest], {"min.insync.replicas": "2"})
        create_topic(cluster, f"tp-rf1-{tag}", [lead], {})
        print(
            f"throughput: {args.records:,} x {args.size} B, both topics led by node {lead}",
            flush=True,
        )
        for key, topic, acks in (
            ("rf3_acks_all", f"tp-rf3-{tag}", "all"),
            ("rf1_acks_1", f"tp-rf1-{tag}", "1"),
        ):
            r = produce_bulk(cluster.bootstrap, topic, args.records, args.size, acks)
            r["high_watermark"] = high_watermark(cluster, topic)  # records + 1 warm-up
            results[key] = r
            print(
                f"  {key:<13} {r['records_s']:>10,.0f} rec/s {r['mb_s']:6.1f} MB/s "
                f"p50 {r['p50_ms']:7.2f} ms p99 {r['p99_ms']:7.2f} ms errors {r['errors']:.0f} "
                f"high watermark {r['high_watermark']:,}",
                flush=True,
            )

        # 2. partition-leader failover.
        print(
            f"leader failover: {args.kills} x kill -9 of the partition leader, producer {args.rate:.0f} rec/s",
            flush=True,
        )
        leader_rows, leader_stats = leader_failover(cluster, args.kills, args.rate, args.timeout)
        print(f"  producer: {leader_stats}", flush=True)

        # 3. controller failover.
        print(
            f"controller failover: {args.controller_kills} x kill -9 of the active controller",
            flush=True,
        )
        ctl_rows = controller_failover(cluster, args.controller_kills, args.timeout)
    except Exception as exc:  # report what was measured, with the logs, instead of nothing
        traceback.print_exc()
        results["error"] = repr(exc)
        print("run aborted:", repr(exc), flush=True)
        print(cluster.log_tails(3000), flush=True)
    finally:
        cluster.stop()
        logs = keep_logs(cluster, Path(args.log_dir))
        shutil.rmtree(root, ignore_errors=True)

    total = time.perf_counter() - started
    rf3, rf1 = results.get("rf3_acks_all", {}), results.get("rf1_acks_1", {})
    ratio = rf3.get("records_s", NAN) / rf1.get("records_s", NAN) if rf1 else NAN

    def col(rows: list[dict[str, Any]], key: str) -> list[float]:
        return [float(r.get(key, NAN)) for r in rows]

    first_new = col(leader_rows, "first_ack_new_ms")
    first_any = col(leader_rows, "first_ack_any_ms")
    meta_leader = col(leader_rows, "metadata_leader_ms")
    isr_full = col(leader_rows, "isr_full_s")
    ctl = col(ctl_rows, "create_ok_ms")
    not_ctl = [r["first_ack_new_ms"] for r in leader_rows if not r["was_controller"]]
    was_ctl = [r["first_ack_new_ms"] for r in leader_rows if r["was_controller"]]

    print()
    print(
        f"=== summary (broker.session.timeout.ms={args.session_timeout_ms}, "
        f"broker.heartbeat.interval.ms={args.heartbeat_ms}; run took {total:.0f} s) ==="
    )
    print(f"{'measure':<58} {'n':>3} {'p50':>10} {'max':>10}")
    for label, values, unit in (
        ("leader kill -> first ack of a record enqueued after kill", first_new, "ms"),
        ("  of which: leader was not the controller", not_ctl, "ms"),
        ("  of which: leader was also the active controller", was_ctl, "ms"),
        ("leader kill -> first ack of any record", first_any, "ms"),
        ("leader kill -> Metadata names a new leader", meta_leader, "ms"),
        ("leader restart -> ISR full again", isr_full, "s"),
        ("controller kill -> CreateTopics succeeds", ctl, "ms"),
    ):
        n = sum(1 for v in values if v == v)
        fmt = "{:>8.0f} {}" if unit == "ms" else "{:>8.1f} {}"
        print(
            f"{label:<58} {n:>3} {fmt.format(p50(values), unit):>10} {fmt.format(vmax(values), unit):>10}"
        )
    for key, r in (("RF=3 acks=all", rf3), ("RF=1 acks=1", rf1)):
        if r:
            print(
                f"throughput {key:<14} {r['records_s']:>10,.0f} rec/s {r['mb_s']:6.1f} MB/s "
                f"p50 {r['p50_ms']:7.2f} ms p99 {r['p99_ms']:7.2f} ms errors {r['errors']:.0f}"
            )
    print(f"throughput ratio RF3/RF1: {ratio:.2f}")
    print(
        f"failover producer: sent {leader_stats.get('sent')}, acked {leader_stats.get('acked')}, "
        f"failed {leader_stats.get('failed')}, client errors {len(leader_stats.get('client_errors', []))}"
    )
    for node_id, info in sorted(logs.items()):
        print(f"node {node_id} log: {info['counts'] or 'no WARNING/ERROR lines'}")
        for line in info["samples"]:
            print(f"    {line}")
    print(f"node logs kept in {args.log_dir}")
    print(
        json.dumps(
            finite(
                {
                    "bench": "cluster_failover",
                    "session_timeout_ms": args.session_timeout_ms,
                    "heartbeat_ms": args.heartbeat_ms,
                    "leader_kills": len(leader_rows),
                    "leader_first_ack_new_ms": {"p50": p50(first_new), "max": vmax(first_new)},
                    "leader_first_ack_any_ms": {"p50": p50(first_any), "max": vmax(first_any)},
                    "leader_metadata_ms": {"p50": p50(meta_leader), "max": vmax(meta_leader)},
                    "leader_isr_full_s": {"p50": p50(isr_full), "max": vmax(isr_full)},
                    "controller_kills": len(ctl_rows),
                    "controller_create_ok_ms": {"p50": p50(ctl), "max": vmax(ctl)},
                    "rf3_acks_all": rf3,
                    "rf1_acks_1": rf1,
                    "rf3_rf1_ratio": ratio,
                    "failover_producer": {
                        k: v for k, v in leader_stats.items() if not k.endswith("examples")
                    },
                    "seconds": total,
                    "error": results.get("error"),
                }
            ),
            default=str,
        )
    )


if __name__ == "__main__":
    main()
