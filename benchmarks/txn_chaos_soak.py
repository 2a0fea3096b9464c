"""The transactional chaos soak: :mod:`pydmq.chaos.txn_workload` against a 3-node pydmq
cluster for ``--minutes`` (default 30) while brokers are SIGKILLed or SIGSTOPped.

Starts three combined broker+controller nodes (``pydmq.testing.cluster.ClusterProcess``,
fast-failover settings, ``__transaction_state`` replicated 3 ways with min.insync 2). The
main thread runs the workload in rounds (each on fresh ``soak<N>-in``/``-out`` topics, RF=3,
``--inputs`` inputs, consume-transform-produce with a group, aborts and fenced incarnations)
and checks each round's history with :func:`pydmq.chaos.txn_checker.check_transactions`. A
fault thread (the only one that signals nodes) picks a random node every ``--interval``
seconds and either SIGKILLs it and starts it again after ``--down`` seconds, or SIGSTOPs it
and SIGCONTs it after ``--down`` seconds (``--pause-share`` of the faults); one node is down
at a time, and the next fault waits until Metadata lists three brokers again. Faults are
held off while a round creates and seeds its topics (an RF=3 topic cannot be created with a
node down): from the start of a round until its first committed transaction.

A round that raises (the workload's setup, its final wait for a stable output or its drains
gave up) is counted in ``round_errors`` with its message; its history is lost. A round whose
check is not clean has its full history written to ``--out-dir`` (JSON, values as
``repr``) for a post-mortem; the node logs are copied there at the end. Figures are printed
(transactions committed/aborted/fenced/indeterminate, anomalies by kind with examples,
faults by kind); nothing is asserted, and the exit status is 1 when an anomaly was found.

Only the node processes this script started are signalled; every wait is bounded.

    .venv/bin/python benchmarks/txn_chaos_soak.py                    # 30 minutes
    .venv/bin/python benchmarks/txn_chaos_soak.py --minutes 5 --interval 10 --seed 7
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pydmq.chaos.txn_checker import TXN_ANOMALY_NAMES, TxnReport, check_transactions
from pydmq.chaos.txn_history import TxnHistory
from pydmq.chaos.txn_workload import TxnWorkloadConfig, run_txn_workload
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess

NODES = 3

CLUSTER_PROPS: dict[str, object] = {
    **FAST_FAILOVER,
    "num.partitions": 3,
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 2,
}


class FaultInjector(threading.Thread):
    """Owns every signal sent to the cluster's nodes while the soak runs: one fault per
    ``interval`` seconds on a random node, undone after ``down`` seconds. Started and
    stopped by the main thread, which touches the nodes again only after :meth:`finish`."""

    def __init__(
        self,
        cluster: ClusterProcess,
        rng: random.Random,
        interval: float,
        down: float,
        pause_share: float,
    ) -> None:
        super().__init__(name="fault-injector", daemon=True)
        self.cluster = cluster
        self.rng = rng
        self.interval = interval
        self.down = down
        self.pause_share = pause_share
        self.faults: Counter[str] = Counter()
        self.errors: list[str] = []
        self.log: list[str] = []
        self._stopping = threading.Event()
        self._quiet = threading.Lock()  # held by the main thread while a round sets up
        self._held = False  # main thread only
        self._began = time.monotonic()

    def run(self) -> None:
        while not self._stopping.wait(self.interval):
            node_id = self.rng.choice(sorted(self.cluster.nodes))
            kind = "sigstop" if self.rng.random() < self.pause_share else "sigkill"
            at = time.monotonic() - self._began
            try:
                with self._quiet:
                    self._inject(kind, node_id)
                self.faults[kind] += 1
                self.log.append(f"{at:7.1f}s {kind} node {node_id}")
            except Exception as exc:  # a node that would not come back: next tick retries
                self.errors.append(f"{at:.1f}s {kind} node {node_id}: {exc!r}"[:500])
                self._heal()

    def _inject(self, kind: str, node_id: int) -> None:
        if kind == "sigkill":
            self.cluster.kill(node_id)
            self._stopping.wait(self.down)
            self.cluster.start_node(node_id, timeout=60)
        else:
            self.cluster.pause(node_id)
            self._stopping.wait(self.down)
            self.cluster.resume(node_id)
        self.cluster.wait_for_brokers(NODES, timeout=60)

    def _heal(self) -> None:
        """Every node running and continued (after a failed fault, or at the end)."""
        for node_id, node in self.cluster.nodes.items():
            try:
                if node.paused:
                    self.cluster.resume(node_id)
                if not node.running:
                    self.cluster.start_node(node_id, timeout=60)
            except Exception as exc:
                self.errors.append(f"healing node {node_id}: {exc!r}"[:500])

    def hold(self) -> None:
        """No fault from now until :meth:`release` (waits for the fault under way to be
        undone and the cluster to be whole again). Main thread."""
        if not self._held:
            self._quiet.acquire()
            self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._quiet.release()

    def finish(self, timeout: float) -> None:
        self.release()
        self._stopping.set()
        self.join(timeout)
        self._heal()


def history_json(history: TxnHistory) -> dict[str, Any]:
    """The history as JSON (bytes as ``repr``, partitions as ``topic-partition``)."""

    def convert(value: Any) -> Any:
        if isinstance(value, bytes):
            return repr(value)
        if isinstance(value, dict):
            return {
                (f"{k[0]}-{k[1]}" if isinstance(k, tuple) else str(k)): convert(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [convert(v) for v in value]
        return value

    converted: dict[str, Any] = convert(dataclasses.asdict(history))
    return converted


class Totals:
    """The figures summed over every round (main thread)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.clean_rounds = 0
        self.round_errors: list[str] = []
        self.transactions: Counter[str] = Counter()
        self.fenced = 0
        self.records_written = 0
        self.reads = 0
        self.indeterminate_visible = 0
        self.anomalies: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {name: [] for name in TXN_ANOMALY_NAMES}
        self.client_errors: Counter[str] = Counter()
        # The longest time from a transaction's start to the next one's (or the round's end)
        # of one producer: a bound on the longest client call inside it (a stalled request).
        self.longest_transaction_s = 0.0

    def add(self, history: TxnHistory, report: TxnReport) -> None:
        self.rounds += 1
        self.clean_rounds += report.ok
        self.transactions.update(report.transactions)
        self.fenced += sum(1 for t in history.transactions if t.error and "FENCED" in t.error)
        self.records_written += report.records_written
        self.reads += report.reads
        self.indeterminate_visible += report.indeterminate_visible
        for name, anomaly in report.anomalies.items():
            self.anomalies[name] += anomaly.count
            room = 5 - len(self.examples[name])
            self.examples[name].extend(list(anomaly.examples)[: max(room, 0)])
        for error in report.client_errors:
            self.client_errors[error.split(": ", 1)[-1][:120]] += 1
        by_producer: dict[str, list[float]] = {}
        for txn in history.transactions:
            by_producer.setdefault(txn.transactional_id, []).append(txn.began_at)
        for began_at in by_producer.values():
            starts = [*sorted(began_at), history.ended_at]
            for began, following in itertools.pairwise(starts):
                self.longest_transaction_s = max(self.longest_transaction_s, following - began)

    def to_json(self, faults: FaultInjector, seconds: float) -> dict[str, Any]:
        return {
            "seconds": round(seconds, 1),
            "rounds": self.rounds,
            "clean_rounds": self.clean_rounds,
            "round_errors": self.round_errors,
            "transactions": {**dict(self.transactions), "fenced": self.fenced},
            "records_written": self.records_written,
            "reads": self.reads,
            "indeterminate_visible": self.indeterminate_visible,
            "anomalies": {name: self.anomalies[name] for name in TXN_ANOMALY_NAMES},
            "anomaly_examples": {k: v for k, v in self.examples.items() if v},
            "client_errors": dict(self.client_errors.most_common(20)),
            "longest_transaction_s": round(self.longest_transaction_s, 1),
            "faults": dict(faults.faults),
            "fault_errors": faults.errors,
        }


def soak(args: argparse.Namespace) -> int:
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="pydmq-txn-soak-"))
    cluster = ClusterProcess(NODES, root / "cluster", CLUSTER_PROPS)
    totals = Totals()
    began = time.monotonic()
    deadline = began + args.minutes * 60
    try:
        cluster.start()
        cluster.wait_for_brokers(NODES, timeout=60)
        faults = FaultInjector(cluster, rng, args.interval, args.down, args.pause_share)
        faults.start()
        try:
            while time.monotonic() < deadline:
                number = totals.rounds + len(totals.round_errors)
                config = TxnWorkloadConfig(
                    prefix=f"soak{number}",
                    inputs=args.inputs,
                    replication=NODES,
                    timeout=args.round_timeout,
                )
                round_began = time.monotonic()
                faults.hold()
                try:
                    cluster.wait_for_brokers(NODES, timeout=60)
                    history = run_txn_workload(
                        cluster.bootstrap, config, lambda _committed: faults.release()
                    )
                except Exception as exc:
                    totals.round_errors.append(f"round {number}: {exc!r}"[:500])
                    print(f"round {number}: raised {exc!r}"[:300], flush=True)
                    time.sleep(2)  # (and lets a due fault take its turn)
                    continue
                finally:
                    faults.release()
                report = check_transactions(history)
                totals.add(history, report)
                if not report.ok:
                    path = out_dir / f"round-{number}-history.json"
                    path.write_text(json.dumps(history_json(history), indent=1))
                    (out_dir / f"round-{number}-report.json").write_text(
                        json.dumps(report.to_json(), indent=1)
                    )
                print(
                    f"round {number}: ok={report.ok} {dict(report.transactions)} "
                    f"anomalies={ {k: a.count for k, a in report.anomalies.items() if a.count} } "
                    f"faults so far={dict(faults.faults)} "
                    f"{time.monotonic() - round_began:.0f} s",
                    flush=True,
                )
        finally:
            faults.finish(args.down + 120)
        summary = totals.to_json(faults, time.monotonic() - began)
        summary["fault_log"] = faults.log
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        summary.pop("fault_log")
        print(json.dumps(summary, indent=1))
    finally:
        cluster.copy_logs(out_dir / "logs")
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0 if sum(totals.anomalies.values()) == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to run (30)")
    parser.add_argument("--interval", type=float, default=20.0, help="seconds between faults")
    parser.add_argument("--down", type=float, default=5.0, help="seconds a node stays down")
    parser.add_argument(
        "--pause-share", type=float, default=0.3, help="share of faults that are SIGSTOP"
    )
    parser.add_argument("--inputs", type=int, default=200, help="inputs per round")
    parser.add_argument("--round-timeout", type=float, default=300.0, help="bound per wait")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out-dir", default="build/txn-chaos-soak")
    return soak(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
