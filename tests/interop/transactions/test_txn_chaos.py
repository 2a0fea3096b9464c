"""The transactional chaos workload (pydmq.chaos.txn_workload) checked by the transactional
checker (pydmq.chaos.txn_checker): consume-transform-produce with a group, multi-partition
transactions, aborts and fenced producer instances, read_committed and read_uncommitted
readers throughout. The checker must find no aborted read, torn transaction, lost committed
write, duplicate across fenced epochs nor read past the LSO.

Targets: the reference Kafka 4.4; pydmq on one node; a 3-node pydmq cluster where a broker
is SIGKILLed mid-run and started again (the ``transactions`` marker, see conftest.py).

The killed broker is the transaction coordinator of the workload's transactional id, unless
that node also coordinates its group: then another node. librdkafka cannot survive the loss of
its group coordinator inside a transaction: ``send_offsets_to_transaction`` waits forever,
whatever its timeout, once the dead broker has left the Metadata answers (librdkafka #5456 and
#5511, open; Kafka's KRaft brokers leave fenced brokers out of Metadata too). The C call holds
the test's main thread where no pytest-timeout signal can reach it: a fresh-clone CI run
waited 57 minutes in it.
"""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("confluent_kafka")

from pydmq.chaos.txn_checker import check_transactions
from pydmq.chaos.txn_workload import TxnWorkloadConfig, run_txn_workload
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from support.raw_client import RawClient

from .clients import unique
from .targets import KAFKA, PYDMQ, PYDMQ_CLUSTER, Target, running_target

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

INPUTS = 120
GROUP, TRANSACTION = 0, 1  # FindCoordinator key types


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
    victim: list[int] = []

    def on_progress(committed: int) -> None:
        if target.cluster is not None and not killed and committed >= INPUTS // 3:
            victim.append(_victim(target, config.prefix))
            target.kill_broker(victim[0])
            killed.append(committed)
        elif killed and len(killed) == 1 and committed >= 2 * INPUTS // 3:
            target.restart_broker(victim[0])
            killed.append(committed)

    history = run_txn_workload(target.bootstrap, config, on_progress)
    report = check_transactions(history)
    summary = report.to_json()
    print(
        f"\ntransactional workload on {target.name}: {json.dumps(summary)}; broker killed/"
        f"restarted at {killed} committed inputs (node {victim}); {time.monotonic() - began:.1f} s"
    )
    assert report.ok, json.dumps(summary, indent=1)
    # the run exercised what it is meant to: commits, aborts and fencings all happened
    assert report.transactions["committed"] > 0
    assert report.transactions["aborted"] > 0
    assert report.transactions["indeterminate"] > 0
    assert not [e for e in history.client_errors if "inputs committed" in e], history.client_errors


def _victim(target: Target, prefix: str) -> int:
    """The node to SIGKILL: the transaction coordinator of ``<prefix>-tid``, or any other
    node when it also coordinates ``<prefix>-group`` (see the module's docstring)."""
    with RawClient(target.bootstrap.split(",")[0], timeout=20) as raw:
        found = {}
        for key_type, key in ((GROUP, f"{prefix}-group"), (TRANSACTION, f"{prefix}-tid")):
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            [coordinator] = raw.request(10, 4, request).body.coordinators
            assert coordinator.error_code == 0, coordinator
            found[key_type] = coordinator.node_id
    if found[TRANSACTION] != found[GROUP]:
        return int(found[TRANSACTION])
    assert target.cluster is not None
    return min(n for n in target.cluster.nodes if n != found[GROUP])
