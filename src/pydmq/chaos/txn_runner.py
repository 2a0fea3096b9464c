"""``pydmq chaos --workload transactions``: the transactional workload under the nemesis.

The same 3-node cluster behind the proxy as the record workload (:mod:`.runner`), with
``__consumer_offsets`` and ``__transaction_state`` replicated three ways. The workload of
:mod:`.txn_workload` (consume-transform-produce with a group, multi-partition transactions,
aborts, fenced instances, read_committed and read_uncommitted readers) runs in rounds, each on
topics of its own, one after the other for the whole ``duration``, while the nemesis injects
faults from its own thread. The observer watches the two internal topics, so the leaders the
nemesis kills, pauses and isolates are the group and transaction coordinators (and, every
topic being replicated on every node, partition leaders of the round's topics too).

Every round that ends with its history is checked by :func:`~.txn_checker.check_transactions`
(aborted reads, torn transactions, lost committed writes, duplicates across fenced epochs,
reads past the LSO); the report adds them up. A round that cannot finish (its topics could not
be created, its output never became stable, it could not be drained) is a harness error, not
an anomaly, and is counted as unchecked. The client faults of the record workload
(``isolate_client``, ``crash_member``) are not among its kinds: the round's clients come and go.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydmq.chaos.faults import STORAGE_FAULT_KINDS, Nemesis
from pydmq.chaos.observer import Observer
from pydmq.chaos.storage import storage_faults_unavailable
from pydmq.chaos.topology import ChaosCluster
from pydmq.chaos.txn_checker import TXN_ANOMALY_NAMES, TxnReport, check_transactions
from pydmq.chaos.txn_workload import TxnWorkloadConfig, create_workload_topics, run_txn_workload

__all__ = ["CLIENT_FAULT_KINDS", "TxnChaosConfig", "TxnChaosResult", "run_transactions"]

CLIENT_FAULT_KINDS = ("isolate_client", "crash_member")
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
REPLICATION_FACTOR = 3
NODE_CONFIG: dict[str, object] = {
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": REPLICATION_FACTOR,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": REPLICATION_FACTOR,
    "transaction.state.log.min.isr": 2,
    "group.initial.rebalance.delay.ms": 0,
}


@dataclass(slots=True)
class TxnChaosConfig:
    duration: float = 60.0
    seed: int = 1
    kinds: Sequence[str] = ()
    base_dir: Path | None = None  # None: a temporary directory, removed unless keep
    keep: bool = False
    nodes: int = 3
    inputs: int = 120  # per round
    round_timeout: float = 90.0  # every wait of a round (librdkafka calls included)
    node_disk_mb: int = 512


@dataclass(slots=True)
class TxnChaosResult:
    rounds: list[dict[str, Any]] = field(default_factory=list)
    anomalies: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TXN_ANOMALY_NAMES, 0))
    examples: list[str] = field(default_factory=list)
    transactions: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    unhealthy: list[str] = field(default_factory=list)
    harness_errors: list[str] = field(default_factory=list)
    client_errors: list[str] = field(default_factory=list)

    @property
    def checked(self) -> int:
        return sum(1 for r in self.rounds if r["checked"])

    @property
    def ok(self) -> bool:
        """No anomaly in any checked round, at least one round checked, no harness error."""
        return not any(self.anomalies.values()) and self.checked > 0 and not self.harness_errors

    def add(self, name: str, report: TxnReport, seconds: float) -> None:
        summary = report.to_json()
        self.rounds.append(
            {"round": name, "checked": True, "ok": report.ok, "seconds": round(seconds, 1),
             "transactions": summary["transactions"]}
        )  # fmt: skip
        for kind, anomaly in report.anomalies.items():
            self.anomalies[kind] = self.anomalies.get(kind, 0) + anomaly.count
            self.examples.extend(f"{name}: {kind}: {e}" for e in anomaly.examples[:2])
        for outcome, count in report.transactions.items():
            self.transactions[outcome] = self.transactions.get(outcome, 0) + count
        self.client_errors.extend(f"{name}: {e}" for e in report.client_errors[:5])

    def unchecked(self, name: str, why: str, seconds: float) -> None:
        self.rounds.append(
            {"round": name, "checked": False, "ok": False, "seconds": round(seconds, 1)}
        )
        self.client_errors.append(f"{name}: not checked: {why}")

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "rounds": len(self.rounds),
            "rounds_checked": self.checked,
            "anomalies": dict(self.anomalies),
            "anomaly_examples": self.examples[:20],
            "transactions": dict(self.transactions),
            "faults": dict(self.faults),
            "unhealthy": list(self.unhealthy),
            "harness_errors": list(self.harness_errors),
            "client_errors": self.client_errors[:40],
            "round_details": list(self.rounds),
        }


def run_transactions(config: TxnChaosConfig, log: Callable[[str], None] = print) -> TxnChaosResult:
    """Run the transactional workload in rounds under faults for ``config.duration`` s."""
    unknown = set(config.kinds) & set(CLIENT_FAULT_KINDS)
    if unknown:
        raise ValueError(f"fault kinds the transactional workload has no clients for: {unknown}")
    temp = config.base_dir is None
    base = Path(tempfile.mkdtemp(prefix="pydmq-txnchaos-")) if temp else Path(config.base_dir)  # type: ignore[arg-type]
    rng = random.Random(config.seed)
    storage = bool(set(config.kinds) & set(STORAGE_FAULT_KINDS))
    if storage and (missing := storage_faults_unavailable()) is not None:
        raise RuntimeError(f"storage faults unavailable: {missing}")
    cluster = ChaosCluster(
        config.nodes,
        base,
        NODE_CONFIG,
        disk_mb=config.node_disk_mb if storage else None,
        failpoints=storage,
    )
    result = TxnChaosResult()
    log(f"chaos (transactions): seed {config.seed}, {config.duration:.0f} s, data in {base}")
    cluster.start()
    observer: Observer | None = None
    try:
        nemesis_ref: list[Nemesis] = []
        observer = Observer(
            {i: cluster.direct_address(i) for i in cluster.node_ids},
            INTERNAL_TOPICS,
            lambda: nemesis_ref[0].avoid() if nemesis_ref else set(),
        )
        observer.start()
        nemesis = Nemesis(cluster, observer, [], [], rng, config.kinds, log=log)
        nemesis_ref.append(nemesis)
        # a fault-free first round creates both internal topics and proves the setup
        _round(cluster.bootstrap, config, "warmup", result, log)
        if not _wait(lambda: observer.healthy(REPLICATION_FACTOR), 60):
            result.harness_errors.append("the internal topics never got a full ISR")
            return result
        deadline = time.monotonic() + config.duration
        faults = threading.Thread(
            target=nemesis.run_until, args=(deadline,), name="chaos-nemesis", daemon=True
        )
        faults.start()
        number = 0
        while time.monotonic() < deadline:
            number += 1
            _round(cluster.bootstrap, config, f"r{number}", result, log)
        faults.join(config.round_timeout + 60)
        if faults.is_alive():
            result.harness_errors.append("the nemesis did not finish its last fault")
        log("chaos (transactions): healing")
        nemesis.heal_everything()
        if not nemesis.wait_healthy():
            result.harness_errors.append("the cluster did not recover a full ISR after healing")
        _round(cluster.bootstrap, config, "healed", result, log)
        for record in nemesis.faults:
            result.faults[record.kind] = result.faults.get(record.kind, 0) + 1
        result.unhealthy = list(nemesis.unhealthy)
        return result
    finally:
        if observer is not None:
            observer.stop_event.set()
            observer.join(10)
        cluster.stop()
        cluster.release_disks(keep=config.keep or not result.ok)
        if temp and result.ok and not config.keep:
            shutil.rmtree(base, ignore_errors=True)


def _round(
    bootstrap: str,
    config: TxnChaosConfig,
    name: str,
    result: TxnChaosResult,
    log: Callable[[str], None],
) -> None:
    began = time.monotonic()
    workload = TxnWorkloadConfig(
        prefix=f"txnchaos-{config.seed}-{name}",
        inputs=config.inputs,
        replication=REPLICATION_FACTOR,
        timeout=config.round_timeout,
        create_topics=False,
    )
    try:
        # Kafka refuses replication factor 3 while a node is down: waited out, not a failure
        create_workload_topics(bootstrap, workload, retry=True)
        history = run_txn_workload(bootstrap, workload)
    except Exception as exc:  # a round the faults kept from finishing: reported, not hidden
        result.unchecked(name, f"{type(exc).__name__}: {exc}", time.monotonic() - began)
        log(f"round {name}: not checked ({type(exc).__name__}: {str(exc)[:200]})")
        return
    report = check_transactions(history)
    result.add(name, report, time.monotonic() - began)
    log(
        f"round {name}: {'ok' if report.ok else 'ANOMALIES'} {report.transactions} in "
        f"{time.monotonic() - began:.1f} s"
    )


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False
