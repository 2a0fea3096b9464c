"""The Java client (kafka-clients 4.x) uses transactions v2 (KIP-890 part 2) against pydmq, as
it does against the reference Kafka 4.4: the same transactional plan run on both gives the
same records, offsets and end offsets at both isolation levels, and the same producer epochs
in DescribeTransactions and DescribeProducers, where transactions v2 shows itself: the
coordinator bumps the epoch at the end of every transaction (4 transactions: epoch 4; a
transactions v1 client stays at epoch 0) and writes each marker with the bumped epoch.

Driven through compat/java/src/TransactionsClient.java (see test_java_transactions.py);
DescribeTransactions is sent with the repository's raw client to the id's coordinator
(FindCoordinator), DescribeProducers to the single broker of a one-node target (every
partition's leader). On a 3-node pydmq cluster the same plan gives the same records, end
offsets and DescribeTransactions as on the reference (its brokers learn the finalized
``transaction.version`` from the controller).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.protocol.messages.describe_producers import DescribeProducersRequest, TopicRequest
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest

from ..differential_support import RawClient
from ..support import PARTITIONS, unique_topic
from ..test_java_transactions import consume, create_topic, java_classes, run_txn_client
from .targets import KAFKA, PYDMQ, PYDMQ_CLUSTER, Target, running_target

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

# pydmq formats a new cluster at transaction.version 1 for now; these targets at 2, as Kafka 4.
TRANSACTIONS_V2 = {"pydmq.bootstrap.transaction.version": "2"}

__all__ = ["java_classes"]  # the fixture, shared with test_java_transactions

DESCRIBE_PRODUCERS = 61
FIND_COORDINATOR = 10
TRANSACTION_KEY = 1
DESCRIBE_TRANSACTIONS = 65
PLAN = "commit:6,abort:6,commit:5,abort:3"
TRANSACTIONS = 4


@pytest.fixture(scope="module")
def kafka_target() -> Iterator[Target]:
    with running_target(KAFKA) as target:
        yield target


@pytest.fixture(scope="module")
def pydmq_target() -> Iterator[Target]:
    with running_target(PYDMQ, TRANSACTIONS_V2) as target:
        yield target


def coordinator_of(bootstrap: str, tid: str) -> str:
    """The ``host:port`` of ``tid``'s transaction coordinator (asked of the first bootstrap
    broker)."""
    with RawClient(bootstrap.split(",")[0]) as client:
        body = client.request(
            FIND_COORDINATOR, 3, FindCoordinatorRequest(key=tid, key_type=TRANSACTION_KEY)
        ).body
    assert body.error_code == 0, body
    return f"{body.host}:{body.port}"


def describe_transaction(bootstrap: str, tid: str) -> dict[str, Any]:
    """DescribeTransactions of ``tid``, asked of its coordinator."""
    with RawClient(coordinator_of(bootstrap, tid)) as client:
        body = client.request(
            DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=[tid])
        ).body
    [state] = body.transaction_states
    return {
        "error": state.error_code,
        "state": state.transaction_state,
        "producer_epoch": state.producer_epoch,
        "partitions": sorted((t.topic, p) for t in state.topics for p in t.partitions),
    }


def describe_producers(bootstrap: str, topic: str) -> dict[int, list[dict[str, int]]]:
    """DescribeProducers of every partition of ``topic`` (the broker leads them all): each
    active producer's epoch, last sequence and open transaction (ids and times differ)."""
    with RawClient(bootstrap) as client:
        body = client.request(
            DESCRIBE_PRODUCERS,
            0,
            DescribeProducersRequest(
                topics=[TopicRequest(name=topic, partition_indexes=list(range(PARTITIONS)))]
            ),
        ).body
    return {
        p.partition_index: [
            {
                "error": p.error_code,
                "producer_epoch": s.producer_epoch,
                "last_sequence": s.last_sequence,
                "current_txn_start_offset": s.current_txn_start_offset,
            }
            for s in p.active_producers
        ]
        for t in body.topics
        for p in t.partitions
    }


def observe(target: Target, classes: Path, *, producers: bool = True) -> dict[str, Any]:
    """Run the plan on ``target``; what both isolation levels and the describe APIs show
    (DescribeProducers only with ``producers``: a one-node target), with the (unique) topic
    name replaced by ``T``."""
    topic = unique_topic("java-tv2")
    tid = f"{topic}-tid"
    create_topic(target.bootstrap, topic, target.replication)
    written = run_txn_client(
        classes,
        "produce",
        "--bootstrap",
        target.bootstrap,
        "--topic",
        topic,
        "--tid",
        tid,
        "--plan",
        PLAN,
    )
    seen: dict[str, Any] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        rows, end = consume(classes, target.bootstrap, topic, isolation)
        seen[isolation] = {
            "records": [(r["p"], r["o"], r["v"].replace(topic, "T")) for r in rows],
            "end": end,
        }
    txn = describe_transaction(target.bootstrap, tid)
    txn["partitions"] = [("T" if t == topic else t, p) for t, p in txn["partitions"]]
    observed = {
        "written": sorted((r["p"], r["o"], r["outcome"]) for r in written),
        "seen": seen,
        "transaction": txn,
    }
    if producers:
        observed["producers"] = describe_producers(target.bootstrap, topic)
    return observed


def observe_fencing(target: Target, classes: Path) -> dict[str, Any]:
    """A producer fenced by a newer instance of its transactional id in the middle of a
    transaction (transactions v2: the coordinator aborts it at a bumped epoch): what the
    client was told, what each isolation level shows and the id's final state."""
    topic = unique_topic("java-tv2-fence")
    tid = f"{topic}-tid"
    create_topic(target.bootstrap, topic, target.replication)
    rows = run_txn_client(
        classes, "fence", "--bootstrap", target.bootstrap, "--topic", topic, "--tid", tid
    )
    seen = {
        isolation: consume(classes, target.bootstrap, topic, isolation)
        for isolation in ("read_committed", "read_uncommitted")
    }
    txn = describe_transaction(target.bootstrap, tid)
    txn["partitions"] = [("T" if t == topic else t, p) for t, p in txn["partitions"]]
    return {
        "client": rows,
        "seen": {
            isolation: ([(r["p"], r["o"], r["v"].replace(topic, "T")) for r in rows_], end)
            for isolation, (rows_, end) in seen.items()
        },
        "transaction": txn,
        "producers": describe_producers(target.bootstrap, topic),
    }


def test_java_producer_fenced_under_transactions_v2_as_on_kafka(
    kafka_target: Target, pydmq_target: Target, java_classes: Path
) -> None:
    expected = observe_fencing(kafka_target, java_classes)
    got = observe_fencing(pydmq_target, java_classes)
    print(f"kafka: {expected}\npydmq: {got}")
    assert expected["client"][0] == {"fenced": "ProducerFencedException"}, expected
    assert got == expected


def test_java_producer_uses_transactions_v2_as_on_kafka(
    kafka_target: Target, pydmq_target: Target, java_classes: Path
) -> None:
    expected = observe(kafka_target, java_classes)
    got = observe(pydmq_target, java_classes)
    print(f"kafka: {expected}\npydmq: {got}")
    # transactions v2 on the reference: one epoch bump per transaction
    assert expected["transaction"]["producer_epoch"] == TRANSACTIONS, expected
    assert got == expected


def test_java_producer_uses_transactions_v2_on_a_cluster(
    kafka_target: Target, java_classes: Path
) -> None:
    expected = observe(kafka_target, java_classes, producers=False)
    with running_target(PYDMQ_CLUSTER, TRANSACTIONS_V2) as cluster:
        got = observe(cluster, java_classes, producers=False)
    print(f"kafka: {expected}\npydmq cluster: {got}")
    assert got == expected
