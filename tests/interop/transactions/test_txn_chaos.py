"""The transactional chaos workload (pydmq.chaos.txn_workload) checked by the transactional
checker (pydmq.chaos.txn_checker): consume-transform-produce with a group, multi-partition
transactions, aborts and fenced producer instances, read_committed and read_uncommitted
readers throughout. The checker must find no aborted read, torn transaction, lost committed
write, duplicate across fenced epochs nor read past the LSO.

Targets: the reference Kafka 4.4; pydmq on one node; a 3-node pydmq cluster where a broker
is SIGKILLed mid-run and started again (the ``transactions`` marker, see conftest.py).
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("confluent_kafka")

from pydmq.chaos.txn_checker import check_transactions
from pydmq.chaos.txn_workload import TxnWorkloadConfig, run_txn_workload

from .clients import unique
from .targets import KAFKA, PYDMQ, PYDMQ_CLUSTER, Target, running_target

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

INPUTS = 120
KILLED_NODE = 2


@pytest.mark.parametrize(
    "target_name",
    [
        pytest.param(KAFKA, id=KAFKA),
        pytest.param(PYDMQ, id=PYDMQ, marks=pytest.mark.transactions),
        pytest.param(PYDMQ_CLUSTER, id=PYDMQ_CLUSTER, marks=pytest.mark.transactions),
    ],
)
def test_transactional_workload_is_clean(target_name: str) -> None:
    with running_target(target_name) as target:
        run_and_check(target)


def run_and_check(target: Target) -> None:
    began = time.monotonic()
    config = TxnWorkloadConfig(
        prefix=unique("txnchaos"), inputs=INPUTS, replication=target.replication, timeout=180.0
    )
    killed: list[int] = []

    def on_progress(committed: int) -> None:
        if target.cluster is not None and not killed and committed >= INPUTS // 3:
            target.kill_broker(KILLED_NODE)
            killed.append(committed)
        elif killed and len(killed) == 1 and committed >= 2 * INPUTS // 3:
            target.restart_broker(KILLED_NODE)
            killed.append(committed)

    history = run_txn_workload(target.bootstrap, config, on_progress)
    report = check_transactions(history)
    summary = report.to_json()
    print(
        f"\ntransactional workload on {target.name}: {json.dumps(summary)}; broker killed/"
        f"restarted at {killed} committed inputs; {time.monotonic() - began:.1f} s"
    )
    assert report.ok, json.dumps(summary, indent=1)
    # the run exercised what it is meant to: commits, aborts and fencings all happened
    assert report.transactions["committed"] > 0
    assert report.transactions["aborted"] > 0
    assert report.transactions["indeterminate"] > 0
    assert not [e for e in history.client_errors if "inputs committed" in e], history.client_errors
