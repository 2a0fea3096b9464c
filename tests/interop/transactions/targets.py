"""The brokers a transaction proof runs against, started the same way for every test.

A target is named by a string: ``kafka`` (the reference Apache Kafka 4.4, one KRaft node,
compat/kafka/start.sh), ``pydmq`` (one ``python -m pydmq serve`` child process) and
``pydmq-cluster`` (three pydmq nodes, :class:`pydmq.testing.cluster.ClusterProcess`). Every
target gets the same broker settings (:data:`BROKER_PROPS`, Kafka's property names); a test
that needs a broker killed asks :meth:`Target.kill_broker`, which only the cluster offers.
The test that starts a target owns its processes (only their PIDs are ever signalled).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess
from pydmq.testing.process import BrokerProcess

from ..differential_support import ReferenceKafka, reference_kafka_unavailable, wait_until_serving

KAFKA_START_TIMEOUT = float(os.environ.get("PYDMQ_DIFF_KAFKA_START_TIMEOUT", "120"))

# The same settings on every target (a single node: replication factor 1 everywhere).
BROKER_PROPS: dict[str, str] = {
    "num.partitions": "3",
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

CLUSTER_PROPS: dict[str, object] = {
    **FAST_FAILOVER,
    "num.partitions": 3,
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
}

KAFKA = "kafka"
PYDMQ = "pydmq"
PYDMQ_CLUSTER = "pydmq-cluster"


@dataclass
class Target:
    """A running target: where clients connect, the replication factor to create topics
    with, and (cluster only) the broker a test may SIGKILL and start again."""

    name: str
    bootstrap: str
    replication: int
    log_tail: Callable[[], str]
    cluster: ClusterProcess | None = field(default=None, repr=False)

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL one cluster node (by the PID this test started)."""
        assert self.cluster is not None, f"{self.name} has no broker to kill"
        self.cluster.kill(node_id)

    def restart_broker(self, node_id: int) -> None:
        assert self.cluster is not None, f"{self.name} has no broker to restart"
        self.cluster.start_node(node_id)
        self.cluster.wait_for_brokers(len(self.cluster.nodes), timeout=60)


@contextmanager
def running_target(name: str, props: dict[str, str] | None = None) -> Iterator[Target]:
    """Start target ``name`` with :data:`BROKER_PROPS` (updated by ``props``) and stop it,
    whatever happens; its data is thrown away. When the test fails, the tail of the
    broker's log is printed (pytest shows it with the failure)."""
    settings = {**BROKER_PROPS, **(props or {})}
    root = Path(tempfile.mkdtemp(prefix=f"pydmq-txn-{name}-"))
    starters = {
        KAFKA: lambda: _kafka(settings),
        PYDMQ: lambda: _pydmq(settings, root),
        PYDMQ_CLUSTER: lambda: _cluster(props or {}, root),
    }
    if name not in starters:
        raise ValueError(f"unknown target {name!r}")
    try:
        with starters[name]() as target:
            try:
                yield target
            except BaseException:
                print(f"--- {name} broker log (tail) ---\n{target.log_tail()}")
                raise
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _kafka(settings: dict[str, str]) -> Iterator[Target]:
    missing = reference_kafka_unavailable()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"reference Kafka unavailable in CI: {missing}")
        pytest.skip(missing)
    kafka = ReferenceKafka(settings).start()
    try:
        kafka.wait_ready(KAFKA_START_TIMEOUT)
        yield Target(KAFKA, kafka.bootstrap, 1, kafka.log_tail)
    finally:
        kafka.stop()
        kafka.cleanup()


@contextmanager
def _pydmq(settings: dict[str, str], root: Path) -> Iterator[Target]:
    broker = BrokerProcess(root / "data", overrides=settings, log_path=root / "broker.log")
    try:
        broker.start(30)
        wait_until_serving(broker.bootstrap, time.monotonic() + 30)
        yield Target(PYDMQ, broker.bootstrap, 1, broker.log_tail)
    finally:
        broker.stop()


@contextmanager
def _cluster(props: dict[str, Any], root: Path) -> Iterator[Target]:
    cluster = ClusterProcess(3, root / "cluster", {**CLUSTER_PROPS, **props})
    try:
        cluster.start()
        cluster.wait_for_brokers(3, timeout=60)
        yield Target(PYDMQ_CLUSTER, cluster.bootstrap, 3, cluster.log_tails, cluster)
    finally:
        cluster.stop()
