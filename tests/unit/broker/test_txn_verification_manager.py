"""AddPartitionsToTxnManager without sockets: the coordinator found as the leader of the id's
``__transaction_state`` partition (this node: answered in process and at once), requests to
another broker batched (what queues while one is in flight goes in the next one, one entry per
transactional id), and the answers of a failed request, a top-level error and a coordinator
without a leader."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pydmq.broker.txn_verification import AddPartitionsToTxnManager
from pydmq.config.broker import BrokerConfig
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from pydmq.storage.api import TopicPartition

pytestmark = pytest.mark.timeout(30)

LOCAL, REMOTE = 1, 2
A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class _Brokers:
    """Inter-broker requests: recorded, answered when the test says (each partition NONE,
    unless ``fail`` or ``error``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, int, AddPartitionsToTxnRequest]] = []
        self.release = asyncio.Event()
        self.fail = False
        self.error = ErrorCode.NONE

    async def request(
        self, broker_id: int, api_key: int, version: int, body: Any, timeout: float
    ) -> AddPartitionsToTxnResponse:
        assert api_key == 24
        self.requests.append((broker_id, version, body))
        await self.release.wait()
        if self.fail:
            raise ConnectionError("refused")
        return AddPartitionsToTxnResponse(
            error_code=self.error,
            results_by_transaction=[
                AddPartitionsToTxnResult(
                    transactional_id=txn.transactional_id,
                    topic_results=[
                        AddPartitionsToTxnTopicResult(
                            name=topic.name,
                            results_by_partition=[
                                AddPartitionsToTxnPartitionResult(
                                    partition_index=p, partition_error_code=ErrorCode.NONE
                                )
                                for p in topic.partitions
                            ],
                        )
                        for topic in txn.topics
                    ],
                )
                for txn in body.transactions
            ],
        )

    async def close(self) -> None:
        pass


def _manager(
    brokers: _Brokers,
    leader: int | None,
    config: BrokerConfig | None = None,
    coordinator: Any = None,
) -> AddPartitionsToTxnManager:
    """Node LOCAL; every transactional id's coordinator is ``leader``; the in-process
    coordinator (unless ``coordinator``) answers INVALID_TXN_STATE (so that its answers are
    told apart)."""
    coordinator = coordinator or SimpleNamespace(
        verify_partitions=lambda tid, pid, epoch, tps: dict.fromkeys(
            tps, ErrorCode.INVALID_TXN_STATE
        )
    )
    state_log = SimpleNamespace(partition_for=lambda tid: 0)
    leaders = SimpleNamespace(leader_of=lambda tp: -1 if leader is None else leader)
    return AddPartitionsToTxnManager(
        LOCAL,
        config
        or BrokerConfig({"node.id": LOCAL, "transaction.partition.verification.enable": True}),
        coordinator,  # type: ignore[arg-type]
        state_log,  # type: ignore[arg-type]
        leaders,  # type: ignore[arg-type]
        brokers,  # type: ignore[arg-type]
    )


def test_the_local_coordinator_answers_at_once() -> None:
    brokers = _Brokers()
    manager = _manager(brokers, LOCAL)
    assert manager.enabled
    assert manager.verify("x", 1, 0, [A], False) == {A: ErrorCode.INVALID_TXN_STATE}
    assert brokers.requests == []


def test_a_coordinator_without_leader_is_not_available() -> None:
    manager = _manager(_Brokers(), None)
    assert manager.verify("x", 1, 0, [A], False) == {A: ErrorCode.COORDINATOR_NOT_AVAILABLE}


def test_requests_to_a_remote_coordinator_are_batched() -> None:
    async def scenario() -> None:
        brokers = _Brokers()
        manager = _manager(brokers, REMOTE)
        first = manager.verify("x", 1, 0, [A], False)
        await asyncio.sleep(0)  # the first request is in flight
        queued = [
            manager.verify("y", 2, 0, [A], False),
            manager.verify("z", 3, 0, [A], False),
            manager.verify("z", 3, 0, [B], False),  # same transaction: merged
            manager.verify("y", 4, 0, [B], False),  # another producer id of y: the request after
        ]
        brokers.release.set()
        answers = await asyncio.gather(first, *queued)  # type: ignore[arg-type]
        assert answers[0] == {A: ErrorCode.NONE}
        assert answers[2] == answers[3] == {A: ErrorCode.NONE, B: ErrorCode.NONE}
        sent = [
            [(t.transactional_id, t.producer_id, t.verify_only) for t in body.transactions]
            for _, _, body in brokers.requests
        ]
        assert sent == [
            [("x", 1, True)],
            [("y", 2, True), ("z", 3, True)],
            [("y", 4, True)],
        ]
        assert {(broker, version) for broker, version, _ in brokers.requests} == {(REMOTE, 4)}
        await manager.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("fail", "error", "expected"),
    [
        (True, ErrorCode.NONE, ErrorCode.NETWORK_EXCEPTION),
        (False, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ],
)
def test_a_failed_request_answers_every_partition(fail: bool, error: int, expected: int) -> None:
    async def scenario() -> None:
        brokers = _Brokers()
        brokers.fail, brokers.error = fail, error
        brokers.release.set()
        manager = _manager(brokers, REMOTE)
        answer = await manager.verify("x", 1, 0, [A, B], False)  # type: ignore[misc]
        assert answer == {A: expected, B: expected}

    asyncio.run(scenario())


def test_turned_off_by_the_dynamic_config() -> None:
    config = BrokerConfig({"node.id": LOCAL, "transaction.partition.verification.enable": True})
    manager = _manager(_Brokers(), LOCAL, config)
    config.set_dynamic({"transaction.partition.verification.enable": "false"}, {})
    assert not manager.enabled


def test_transactions_v2_adds_the_partitions() -> None:
    """``add_partition`` (a Produce v12): the coordinator of this node adds the partitions in
    process with transactions v2; another broker's gets AddPartitionsToTxn v5 with
    ``verify_only`` false (a verification of another id sent with it keeps ``verify_only``
    true)."""

    async def scenario() -> None:
        added: list[tuple[str, int, int, list[TopicPartition], int]] = []

        async def add_partitions(
            tid: str, pid: int, epoch: int, tps: list[TopicPartition], *, transaction_version: int
        ) -> int:
            added.append((tid, pid, epoch, list(tps), transaction_version))
            return ErrorCode.CONCURRENT_TRANSACTIONS

        here = _manager(
            _Brokers(), LOCAL, coordinator=SimpleNamespace(add_partitions=add_partitions)
        )
        answer = await here.verify("x", 1, 3, [A], True)  # type: ignore[misc]
        assert answer == {A: ErrorCode.CONCURRENT_TRANSACTIONS}
        assert added == [("x", 1, 3, [A], 2)]

        brokers = _Brokers()
        remote = _manager(brokers, REMOTE)
        first = asyncio.ensure_future(remote.verify("x", 1, 3, [A], True))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        second = asyncio.ensure_future(remote.verify("y", 2, 0, [B], False))  # type: ignore[arg-type]
        third = asyncio.ensure_future(remote.verify("z", 4, 1, [B], True))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        brokers.release.set()
        assert await first == {A: ErrorCode.NONE}
        assert await second == {B: ErrorCode.NONE} and await third == {B: ErrorCode.NONE}
        [(_, v1, r1), (_, v2, r2)] = brokers.requests
        assert v1 == 5 and [(t.transactional_id, t.verify_only) for t in r1.transactions] == [
            ("x", False)
        ]
        assert v2 == 5 and [(t.transactional_id, t.verify_only) for t in r2.transactions] == [
            ("y", True),
            ("z", False),
        ]

    asyncio.run(scenario())
