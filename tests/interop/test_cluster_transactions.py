"""The transaction coordinator on a 3-node cluster: it runs on the leader of each
``__transaction_state`` partition.

FindCoordinator (key type 1) asks the controller for ``__transaction_state`` (replication
factor 3 here, min.insync.replicas 2) and then names the leader of the transactional id's
partition; only that node serves the id (the others answer NOT_COORDINATOR). Its writes are
replicated: once the coordinator is killed, the partition's new leader loads the id as it was
(producer id, epoch, the partitions of a transaction left in PrepareCommit, whose markers it
resumes), and InitProducerId there bumps the epoch.

The coordinator is killed as soon as EndTxn answered: its markers may or may not have reached
both partitions by then (the PrepareCommit record is committed either way), and the new
coordinator must finish the commit from what it loaded: CompleteCommit, then a new epoch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.end_txn import EndTxnRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.testing.cluster import FAST_FAILOVER, ClusterProcess, running_cluster
from support.raw_client import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

LOG_DIR = Path(__file__).resolve().parents[2] / "build" / "cluster-logs"
TXN = "cluster-txn"


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterProcess]:
    overrides = {**FAST_FAILOVER, "transaction.state.log.num.partitions": 3}
    with running_cluster(3, "pydmq-txn-", overrides, LOG_DIR / request.node.name) as c:
        yield c


def _until(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = check()
        except (ConnectionError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


def _coordinator(cluster: ClusterProcess, via: int) -> int | None:
    with RawClient(cluster.node(via).bootstrap, timeout=20) as raw:
        body = raw.request(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=[TXN])).body
    [found] = body.coordinators
    return found.node_id if found.error_code == E.NONE else None


def _init(cluster: ClusterProcess, node_id: int) -> Any:
    with RawClient(cluster.node(node_id).bootstrap, timeout=20) as raw:
        request = InitProducerIdRequest(transactional_id=TXN, transaction_timeout=600_000)
        return raw.request(22, 4, request).body


def _describe(cluster: ClusterProcess, node_id: int) -> Any:
    with RawClient(cluster.node(node_id).bootstrap, timeout=20) as raw:
        body = raw.request(65, 0, DescribeTransactionsRequest(transactional_ids=[TXN])).body
    [state] = body.transaction_states
    return state


def test_the_coordinator_is_the_partition_leader_and_fails_over(cluster: ClusterProcess) -> None:
    leader = _until(lambda: _coordinator(cluster, 1), "FindCoordinator names a coordinator")
    others = [n for n in (1, 2, 3) if n != leader]
    assert all(_coordinator(cluster, n) == leader for n in others)
    assert _init(cluster, others[0]).error_code == E.NOT_COORDINATOR
    init = _until(
        lambda: (lambda b: b if b.error_code == E.NONE else None)(_init(cluster, leader)),
        "InitProducerId on the coordinator",
    )
    pid, epoch = init.producer_id, init.producer_epoch
    assert epoch == 0
    with RawClient(cluster.node(leader).bootstrap, timeout=40) as raw:
        created = raw.request(
            19,
            5,
            CreateTopicsRequest(
                topics=[CreatableTopic(name="t", num_partitions=2, replication_factor=3)],
                timeout=30_000,
            ),
        ).body
        assert created.topics[0].error_code == E.NONE

        def added() -> bool:
            body = raw.request(
                24,
                3,
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=TXN,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[AddPartitionsToTxnTopic(name="t", partitions=[0, 1])],
                ),
            ).body
            codes = {
                p.partition_error_code
                for t in body.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }
            return codes == {E.NONE}

        _until(added, "AddPartitionsToTxn once the topic is known")
        ended = raw.request(
            26,
            3,
            EndTxnRequest(
                transactional_id=TXN, producer_id=pid, producer_epoch=epoch, committed=True
            ),
        ).body
        assert ended.error_code == E.NONE
    cluster.kill(leader)
    survivor = others[0]
    new_leader = _until(
        lambda: (lambda n: n if n not in (None, leader) else None)(_coordinator(cluster, survivor)),
        "a new coordinator after the kill",
    )
    state = _until(
        lambda: (lambda s: s if s.error_code == E.NONE else None)(_describe(cluster, new_leader)),
        "the new coordinator loaded the id",
    )
    assert (state.producer_id, state.producer_epoch) == (pid, epoch)
    assert state.transaction_state in ("PrepareCommit", "CompleteCommit")
    _until(
        lambda: _describe(cluster, new_leader).transaction_state == "CompleteCommit",
        "the new coordinator completes the commit",
    )
    bumped = _until(
        lambda: (lambda b: b if b.error_code == E.NONE else None)(_init(cluster, new_leader)),
        "InitProducerId on the new coordinator",
    )
    assert (bumped.producer_id, bumped.producer_epoch) == (pid, epoch + 1)
