"""Group APIs over the wire (raw frames through our codecs) against an in-process broker,
and committed offsets surviving a restart on the segment engine."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.groups.api import CommitRequest
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode as E
from pydmq.protocol.messages.delete_groups import DeleteGroupsRequest
from pydmq.protocol.messages.describe_groups import DescribeGroupsRequest
from pydmq.protocol.messages.find_coordinator import FindCoordinatorRequest
from pydmq.protocol.messages.heartbeat import HeartbeatRequest
from pydmq.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from pydmq.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from pydmq.protocol.messages.list_groups import ListGroupsRequest
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from pydmq.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from pydmq.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.nodes import broker_of
from support.raw_client import RawClient

METADATA = "\x00\x01\n\t\x7f é 漢字"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 5,
        "group.min.session.timeout.ms": 100,
        "num.partitions": 2,
    }
    with EmbeddedBroker(tmp_path_factory.mktemp("groups") / "d", overrides=overrides) as b:
        yield b


def _topic(raw: RawClient, name: str) -> None:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=True
    )
    created = raw.request(3, 9, request).body  # answered as being created, as Kafka does
    assert created.topics[0].error_code in (0, E.UNKNOWN_TOPIC_OR_PARTITION)
    assert raw.request(3, 9, request).body.topics[0].error_code == 0


def _join(raw: RawClient, version: int, group: str, member_id: str = "") -> object:
    return raw.request(
        11,
        version,
        JoinGroupRequest(
            group_id=group,
            session_timeout=10_000,
            rebalance_timeout=10_000,
            member_id=member_id,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=b"m")],
        ),
    ).body


def test_find_coordinator_all_versions(broker: EmbeddedBroker) -> None:
    host, port = broker.bootstrap.split(":")
    with RawClient(broker.bootstrap) as raw:
        for version in range(4):
            body = raw.request(10, version, FindCoordinatorRequest(key="g")).body
            assert (body.error_code, body.node_id, body.host, body.port) == (0, 1, host, int(port))
        txn = raw.request(10, 3, FindCoordinatorRequest(key="t", key_type=1)).body
        assert (txn.error_code, txn.node_id, txn.port) == (0, 1, int(port))
        for version in (4, 5, 6):
            body = raw.request(
                10, version, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"])
            ).body
            assert [(c.key, c.error_code, c.port) for c in body.coordinators] == [
                ("a", 0, int(port)),
                ("b", 0, int(port)),
            ]
        meta = raw.request(3, 12, MetadataRequest(topics=None)).body
        internal = [t for t in meta.topics if t.name == OFFSETS_TOPIC]
        assert internal and internal[0].is_internal and len(internal[0].partitions) == 5


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave_every_version(broker: EmbeddedBroker, version: int) -> None:
    group = f"wire-{version}"
    with RawClient(broker.bootstrap) as raw:
        joined = _join(raw, version, group)
        if version >= 4:
            assert joined.error_code == E.MEMBER_ID_REQUIRED and joined.member_id
            joined = _join(raw, version, group, joined.member_id)
        assert joined.error_code == 0 and joined.generation_id == 1
        assert joined.leader == joined.member_id and joined.protocol_name == "range"
        member = joined.member_id
        sync_version = min(version, 5)
        synced = raw.request(
            14,
            sync_version,
            SyncGroupRequest(
                group_id=group,
                generation_id=1,
                member_id=member,
                protocol_type="consumer",
                protocol_name="range",
                assignments=[SyncGroupRequestAssignment(member_id=member, assignment=b"A")],
            ),
        ).body
        assert synced.error_code == 0 and synced.assignment == b"A"
        hb_version = min(version, 4)
        ok = raw.request(
            12, hb_version, HeartbeatRequest(group_id=group, generation_id=1, member_id=member)
        ).body
        assert ok.error_code == 0
        stale = raw.request(
            12, hb_version, HeartbeatRequest(group_id=group, generation_id=0, member_id=member)
        ).body
        assert stale.error_code == E.ILLEGAL_GENERATION
        leave_version = min(version, 5)
        if leave_version >= 3:
            left = raw.request(
                13,
                leave_version,
                LeaveGroupRequest(group_id=group, members=[MemberIdentity(member_id=member)]),
            ).body
            assert left.error_code == 0 and [m.error_code for m in left.members] == [0]
        else:
            left = raw.request(
                13, leave_version, LeaveGroupRequest(group_id=group, member_id=member)
            ).body
            assert left.error_code == 0
        described = raw.request(15, 5, DescribeGroupsRequest(groups=[group])).body
        assert described.groups[0].group_state == "Empty"


def test_offsets_over_the_wire(broker: EmbeddedBroker) -> None:
    with RawClient(broker.bootstrap) as raw:
        _topic(raw, "wire-offsets")
        for version in range(2, 10):
            group = f"offsets-{version}"
            body = raw.request(
                8,
                version,
                OffsetCommitRequest(
                    group_id=group,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    topics=[
                        OffsetCommitRequestTopic(
                            name="wire-offsets",
                            partitions=[
                                OffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=17,
                                    committed_leader_epoch=3,
                                    committed_metadata=METADATA,
                                ),
                                OffsetCommitRequestPartition(partition_index=9, committed_offset=1),
                            ],
                        ),
                        OffsetCommitRequestTopic(
                            name="no-such-topic",
                            partitions=[
                                OffsetCommitRequestPartition(partition_index=0, committed_offset=1),
                            ],
                        ),
                    ],
                ),
            ).body
            assert [[p.error_code for p in t.partitions] for t in body.topics] == [
                [0, E.UNKNOWN_TOPIC_OR_PARTITION],
                [E.UNKNOWN_TOPIC_OR_PARTITION],
            ]
            for fetch_version in range(1, 8):
                fetched = raw.request(
                    9,
                    fetch_version,
                    OffsetFetchRequest(
                        group_id=group,
                        topics=[
                            OffsetFetchRequestTopic(name="wire-offsets", partition_indexes=[0, 1])
                        ],
                    ),
                ).body
                parts = fetched.topics[0].partitions
                epoch = 3 if version >= 6 and fetch_version >= 5 else -1
                assert (parts[0].committed_offset, parts[0].metadata) == (17, METADATA)
                assert parts[0].committed_leader_epoch == epoch
                assert (parts[1].committed_offset, parts[1].metadata) == (-1, "")
            everything = raw.request(9, 7, OffsetFetchRequest(group_id=group, topics=None)).body
            assert [
                (t.name, [p.partition_index for p in t.partitions]) for t in everything.topics
            ] == [("wire-offsets", [0])]
            for fetch_version in (8, 9):
                multi = raw.request(
                    9,
                    fetch_version,
                    OffsetFetchRequest(
                        groups=[
                            OffsetFetchRequestGroup(group_id=group, topics=None),
                            OffsetFetchRequestGroup(
                                group_id="nobody",
                                topics=[
                                    OffsetFetchRequestTopics(
                                        name="wire-offsets", partition_indexes=[0]
                                    )
                                ],
                            ),
                        ]
                    ),
                ).body
                first, second = multi.groups
                assert first.topics[0].partitions[0].metadata == METADATA
                assert second.topics[0].partitions[0].committed_offset == -1
        listed = raw.request(16, 5, ListGroupsRequest(states_filter=["empty"])).body
        assert "offsets-9" in {g.group_id for g in listed.groups}
        assert {g.group_type for g in listed.groups} == {"classic"}
        none = raw.request(16, 5, ListGroupsRequest(types_filter=["consumer"])).body
        assert none.groups == []
        deleted = raw.request(
            47,
            0,
            OffsetDeleteRequest(
                group_id="offsets-9",
                topics=[
                    OffsetDeleteRequestTopic(
                        name="wire-offsets",
                        partitions=[OffsetDeleteRequestPartition(partition_index=0)],
                    )
                ],
            ),
        ).body
        assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
        missing = raw.request(47, 0, OffsetDeleteRequest(group_id="nope", topics=[])).body
        assert missing.error_code == E.GROUP_ID_NOT_FOUND
        result = raw.request(42, 2, DeleteGroupsRequest(groups_names=["offsets-8", "nope"])).body
        assert [(r.group_id, r.error_code) for r in result.results] == [
            ("offsets-8", 0),
            ("nope", E.GROUP_ID_NOT_FOUND),
        ]


def test_offsets_survive_restart_on_segment_engine(tmp_path: Path) -> None:
    values = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "d"),
        "offsets.topic.num.partitions": 3,
    }
    broker = broker_of(BrokerConfig(values))
    broker.open_logs()
    broker.group_coordinator.load()
    broker.topic_creator.create_topic("t", 2)

    async def commit() -> None:  # writes run on the event loop, as in a serving broker
        results = broker.group_coordinator.commit_offsets(
            CommitRequest(
                "restart-group",
                "",
                None,
                -1,
                -1,
                {("t", 0): (100, 4, METADATA), ("t", 1): (200, -1, "")},
            )
        )
        assert set(results.values()) == {0}
        broker.group_coordinator.commit_offsets(
            CommitRequest("restart-group", "", None, -1, -1, {("t", 1): (201, -1, "later")})
        )

    asyncio.run(commit())
    broker.replica_manager.shutdown()

    again = broker_of(BrokerConfig(values))
    again.open_logs()
    again.group_coordinator.load()
    try:
        zero = again.group_coordinator.offsets.get("restart-group", "t", 0)
        one = again.group_coordinator.offsets.get("restart-group", "t", 1)
        assert zero is not None and (zero.offset, zero.leader_epoch, zero.metadata) == (
            100,
            4,
            METADATA,
        )
        assert one is not None and (one.offset, one.metadata) == (201, "later")
        assert again.topics.get(OFFSETS_TOPIC) is not None
    finally:
        again.replica_manager.shutdown()
