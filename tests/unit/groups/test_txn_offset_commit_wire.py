"""TxnOffsetCommit (28) over the wire (raw frames through our codecs) against an in-process
broker: every version, the errors Kafka 4 answers, and OffsetFetch's ``require_stable`` before
and after the transaction's marker (``GroupCoordinator.complete_transaction``, called on the
broker's loop as the WriteTxnMarkers handler will)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pydmq.groups.coordinator import GroupCoordinator
from pydmq.groups.log import partition_for
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.api_versions import ApiVersionsRequest
from pydmq.protocol.messages.describe_transactions import DescribeTransactionsRequest
from pydmq.protocol.messages.end_txn import EndTxnRequest
from pydmq.protocol.messages.init_producer_id import InitProducerIdRequest
from pydmq.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pydmq.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from pydmq.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)

TOPIC = "txn-wire"
PARTITIONS = 5  # offsets.topic.num.partitions


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": PARTITIONS,
        "group.min.session.timeout.ms": 100,
        "num.partitions": 2,
        "offset.metadata.max.bytes": 10,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("txn") / "d", overrides=overrides) as b:
        with RawClient(b.bootstrap) as raw:
            request = MetadataRequest(
                topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True
            )
            raw.request(3, 9, request)
            assert raw.request(3, 9, request).body.topics[0].error_code == 0
        yield b


def complete(
    broker: EmbeddedBroker,
    group: str,
    pid: int,
    epoch: int,
    commit: bool,
    transaction_version: int = 0,
) -> int:
    """``complete_transaction`` of ``group``'s partition, run on the broker's loop."""
    coordinator: GroupCoordinator = broker.broker.group_coordinator  # type: ignore[attr-defined]

    async def call() -> int:
        return await coordinator.complete_transaction(
            partition_for(group, PARTITIONS), pid, epoch, 0, commit, transaction_version
        )

    loop: asyncio.AbstractEventLoop = broker._loop  # type: ignore[assignment]
    return asyncio.run_coroutine_threadsafe(call(), loop).result(10)


def txn_commit(
    raw: RawClient,
    group: str,
    *,
    version: int = 3,
    pid: int = 100,
    epoch: int = 0,
    transactional_id: str = "tx",
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
    offset: int = 42,
    metadata: str | None = "m",
    topics: list[tuple[str, list[int]]] | None = None,
) -> list[list[int]]:
    wanted = topics if topics is not None else [(TOPIC, [0])]
    body = raw.request(
        28,
        version,
        TxnOffsetCommitRequest(
            transactional_id=transactional_id,
            group_id=group,
            producer_id=pid,
            producer_epoch=epoch,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            topics=[
                TxnOffsetCommitRequestTopic(
                    name=name,
                    partitions=[
                        TxnOffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=offset,
                            committed_leader_epoch=2,
                            committed_metadata=metadata,
                        )
                        for p in partitions
                    ],
                )
                for name, partitions in wanted
            ],
        ),
    ).body
    assert [t.name for t in body.topics] == [name for name, _ in wanted]
    return [[p.error_code for p in t.partitions] for t in body.topics]


def fetch(raw: RawClient, group: str, version: int, stable: bool) -> tuple[int, int]:
    """(error, offset) of partition 0 of the topic, by OffsetFetch ``version``."""
    if version >= 8:
        body: Any = raw.request(
            9,
            version,
            OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        group_id=group,
                        topics=[OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])],
                    )
                ],
                require_stable=stable,
            ),
        ).body
        [answer] = body.groups[0].topics[0].partitions
    else:
        body = raw.request(
            9,
            version,
            OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
                require_stable=stable,
            ),
        ).body
        [answer] = body.topics[0].partitions
    return answer.error_code, answer.committed_offset


def join(raw: RawClient, group: str, instance: str | None = None) -> tuple[str, int]:
    """A one-member classic group, Stable: (member id, generation)."""
    request = JoinGroupRequest(
        group_id=group,
        session_timeout=30_000,
        rebalance_timeout=30_000,
        member_id="",
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"m")],
    )
    joined = raw.request(11, 7, request).body
    if joined.error_code == E.MEMBER_ID_REQUIRED:
        request.member_id = joined.member_id
        joined = raw.request(11, 7, request).body
    assert joined.error_code == 0
    member, generation = joined.member_id, joined.generation_id
    synced = raw.request(
        14,
        5,
        SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[SyncGroupRequestAssignment(member_id=member, assignment=b"A")],
        ),
    ).body
    assert synced.error_code == 0
    return member, generation


def test_txn_offset_commit_is_advertised_v0_to_v5(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as raw:
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        body = raw.request(18, 3, request).body
        assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}[28] == (0, 5)


@pytest.mark.parametrize("version", range(5))
def test_every_version_commits_only_with_the_marker(broker: EmbeddedBroker, version: int) -> None:
    group = f"txn-v{version}"
    with RawClient(broker.bootstrap) as raw:
        assert txn_commit(raw, group, version=version, pid=200 + version, offset=7) == [[0]]
        assert fetch(raw, group, 6, stable=False) == (0, -1)  # before v7: no require_stable
        assert fetch(raw, group, 7, stable=False) == (0, -1)
        assert fetch(raw, group, 7, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(raw, group, 9, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert complete(broker, group, 200 + version, 0, commit=True) == 0
        for fetch_version, stable in ((6, False), (7, True), (8, True), (9, False)):
            assert fetch(raw, group, fetch_version, stable) == (0, 7)


def test_v5_adds_the_offsets_partition_to_the_transaction(broker: EmbeddedBroker) -> None:
    """TxnOffsetCommit v5 is transactions v2 (KIP-890 part 2): no AddOffsetsToTxn came, so
    the group coordinator has the transaction coordinator add the group's partition; the
    offsets then commit with EndTxn v5 (the markers reach the partition). An unknown producer
    is refused, nothing written."""
    group, tid = "txn-v5", "tx-v5"
    with RawClient(broker.bootstrap) as raw:
        refused = txn_commit(raw, group, version=5, pid=999, transactional_id=tid)
        assert refused == [[E.INVALID_PRODUCER_ID_MAPPING]]
        init = raw.request(
            22, 5, InitProducerIdRequest(transactional_id=tid, transaction_timeout=60_000)
        ).body
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        assert txn_commit(
            raw, group, version=5, pid=pid, epoch=epoch, transactional_id=tid, offset=7
        ) == [[0]]
        assert fetch(raw, group, 9, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        [state] = raw.request(
            65, 0, DescribeTransactionsRequest(transactional_ids=[tid])
        ).body.transaction_states
        offsets = f"__consumer_offsets:{partition_for(group, PARTITIONS)}"
        assert state.transaction_state == "Ongoing"
        assert [f"{t.topic}:{p}" for t in state.topics for p in t.partitions] == [offsets]
        ended = raw.request(
            26,
            5,
            EndTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
            ),
        ).body
        assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)
        for _ in range(500):
            if fetch(raw, group, 9, stable=True) == (0, 7):
                break
            time.sleep(0.01)
        assert fetch(raw, group, 9, stable=True) == (0, 7)


def test_v5_a_late_marker_does_not_end_the_next_transaction(broker: EmbeddedBroker) -> None:
    """Transactions v2 markers carry the bumped epoch: once the next transaction's offsets are
    pending at that epoch, a late (or duplicate) marker of the previous transaction is fenced
    (INVALID_PRODUCER_EPOCH) instead of committing them (KIP-890)."""
    group, tid = "txn-v5-late", "tx-v5-late"
    with RawClient(broker.bootstrap) as raw:
        init = raw.request(
            22, 5, InitProducerIdRequest(transactional_id=tid, transaction_timeout=60_000)
        ).body
        pid, epoch = init.producer_id, init.producer_epoch
        first = txn_commit(
            raw, group, version=5, pid=pid, epoch=epoch, transactional_id=tid, offset=7
        )
        assert first == [[0]]
        ended = raw.request(
            26,
            5,
            EndTxnRequest(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
            ),
        ).body
        bumped = ended.producer_epoch
        assert (ended.error_code, bumped) == (0, epoch + 1)
        for _ in range(500):
            if fetch(raw, group, 9, stable=True) == (0, 7):
                break
            time.sleep(0.01)
        # retried as a client does while the first transaction completes
        for _ in range(500):
            second = txn_commit(
                raw, group, version=5, pid=pid, epoch=bumped, transactional_id=tid, offset=9
            )
            if second != [[E.COORDINATOR_NOT_AVAILABLE]]:
                break
            time.sleep(0.01)
        assert second == [[0]]
        # the previous transaction's marker again, at the bumped epoch: fenced
        late = complete(broker, group, pid, bumped, commit=True, transaction_version=2)
        assert late == E.INVALID_PRODUCER_EPOCH
        assert fetch(raw, group, 9, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(raw, group, 9, stable=False) == (0, 7)


def test_abort_leaves_the_committed_offset(broker: EmbeddedBroker) -> None:
    group = "txn-abort"
    with RawClient(broker.bootstrap) as raw:
        assert txn_commit(raw, group, pid=300, offset=5) == [[0]]
        assert complete(broker, group, 300, 0, commit=True) == 0
        assert txn_commit(raw, group, pid=300, offset=9) == [[0]]
        assert fetch(raw, group, 8, stable=False) == (0, 5)  # the last committed offset
        assert complete(broker, group, 300, 0, commit=False) == 0
        assert fetch(raw, group, 8, stable=True) == (0, 5)


def test_request_errors(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as raw:
        assert txn_commit(raw, "") == [[E.INVALID_GROUP_ID]]
        unknown = txn_commit(raw, "txn-e", topics=[(TOPIC, [0, 9]), ("no-such-topic", [0])])
        assert unknown == [[0, E.UNKNOWN_TOPIC_OR_PARTITION], [E.UNKNOWN_TOPIC_OR_PARTITION]]
        assert txn_commit(raw, "txn-e", metadata="x" * 11) == [[E.OFFSET_METADATA_TOO_LARGE]]
        # an unknown group with a generation: ILLEGAL_GENERATION (v3+); without one it is
        # created, Empty, whatever the member id (Kafka's transactional validation)
        assert txn_commit(raw, "txn-nogroup", generation=1, member="m") == [[E.ILLEGAL_GENERATION]]
        assert txn_commit(raw, "txn-nogroup", pid=150, member="m") == [[0]]
        assert complete(broker, "txn-nogroup", 150, 0, commit=False) == 0


def test_member_checks_of_a_classic_group(broker: EmbeddedBroker) -> None:
    group = "txn-members"
    with RawClient(broker.bootstrap) as raw:
        member, generation = join(raw, group)
        ok = txn_commit(raw, group, pid=400, generation=generation, member=member)
        assert ok == [[0]]
        stale = txn_commit(raw, group, pid=400, generation=generation + 1, member=member)
        assert stale == [[E.ILLEGAL_GENERATION]]
        assert txn_commit(raw, group, pid=400, generation=generation, member="who") == [
            [E.UNKNOWN_MEMBER_ID]
        ]
        # a producer that knows only the group id (v0-v2, or v3 without member): accepted in
        # any state, where an OffsetCommit without member is refused
        assert txn_commit(raw, group, version=2, pid=400) == [[0]]
        assert txn_commit(raw, group, pid=400) == [[0]]
        plain = raw.request(
            8,
            8,
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                topics=[
                    OffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=[OffsetCommitRequestPartition(partition_index=0)],
                    )
                ],
            ),
        ).body
        assert plain.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
        assert complete(broker, group, 400, 0, commit=True) == 0

        static = "txn-static"
        member, generation = join(raw, static, instance="i-1")
        assert txn_commit(
            raw, static, pid=401, generation=generation, member=member, instance="i-1"
        ) == [[0]]
        assert txn_commit(
            raw, static, pid=401, generation=generation, member="other", instance="i-1"
        ) == [[E.FENCED_INSTANCE_ID]]
        assert complete(broker, static, 401, 0, commit=False) == 0


def test_an_older_producer_epoch_is_fenced(broker: EmbeddedBroker) -> None:
    group = "txn-fenced"
    with RawClient(broker.bootstrap) as raw:
        assert txn_commit(raw, group, pid=500, epoch=3, offset=1) == [[0]]
        assert txn_commit(raw, group, pid=500, epoch=3, offset=2) == [[0]]  # no sequence
        assert complete(broker, group, 500, 3, commit=True) == 0
        assert complete(broker, group, 500, 2, commit=True) == E.INVALID_PRODUCER_EPOCH
        assert txn_commit(raw, group, pid=500, epoch=2) == [[E.INVALID_PRODUCER_EPOCH]]
        assert txn_commit(raw, group, pid=500, epoch=4, offset=3) == [[0]]
        assert complete(broker, group, 500, 4, commit=True) == 0
        assert fetch(raw, group, 8, stable=True) == (0, 3)


def test_open_and_ended_transactions_survive_a_restart(tmp_path: Path) -> None:
    """The segment log's batches and markers load into the state the live broker had: an
    open transaction is still pending (and can still be committed), an ended one stays
    ended."""
    overrides = {"offsets.topic.num.partitions": PARTITIONS, "num.partitions": 1}
    first = EmbeddedBroker(tmp_path / "d", overrides=overrides)
    with first, RawClient(first.bootstrap) as raw:
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=TOPIC)], allow_auto_topic_creation=True
        )
        raw.request(3, 9, request)
        assert raw.request(3, 9, request).body.topics[0].error_code == 0
        assert txn_commit(raw, "ended", pid=600, offset=11) == [[0]]
        assert complete(first, "ended", 600, 0, commit=True) == 0
        assert txn_commit(raw, "ended", pid=600, offset=12) == [[0]]
        assert complete(first, "ended", 600, 0, commit=False) == 0
        assert txn_commit(raw, "open", pid=601, offset=21) == [[0]]
    second = EmbeddedBroker(tmp_path / "d", overrides=overrides)
    with second, RawClient(second.bootstrap) as raw:
        assert fetch(raw, "ended", 8, stable=True) == (0, 11)
        assert fetch(raw, "open", 8, stable=True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert fetch(raw, "open", 8, stable=False) == (0, -1)
        assert complete(second, "open", 601, 0, commit=True) == 0
        assert fetch(raw, "open", 8, stable=True) == (0, 21)
