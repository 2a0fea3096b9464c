"""The share group APIs on one embedded node, over the wire: ShareGroupHeartbeat's
assignment (two members share a one-partition topic), ShareGroupDescribe, ListGroups' share
type, DeleteGroups of a share group, and the share session epochs of ShareFetch and
ShareAcknowledge."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.cli import main
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import delete_groups as dg
from pydmq.protocol.messages import list_groups as lg
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages import share_acknowledge as sa
from pydmq.protocol.messages import share_fetch as sf
from pydmq.protocol.messages import share_group_describe as sd
from pydmq.protocol.messages import share_group_heartbeat as sh
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(30)

TOPIC = "shared"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("share") / "d") as b:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        yield b


def _join(client: RawClient, group: str, member: str) -> sh.ShareGroupHeartbeatResponse:
    request = sh.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[TOPIC]
    )
    body: sh.ShareGroupHeartbeatResponse = client.request(76, 1, request).body
    return body


def test_membership_describe_list_and_delete(broker: EmbeddedBroker) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as client:
        first = _join(client, group, a)
        assert first.error_code == 0 and first.member_epoch == 1
        assert first.assignment is not None
        assert [(t.topic_id, t.partitions) for t in first.assignment.topic_partitions] == [
            (topic_id, [0])
        ]
        second = _join(client, group, b)
        assert second.assignment is not None  # one partition, read by both members
        assert second.assignment.topic_partitions[0].partitions == [0]
        described = client.request(77, 1, sd.ShareGroupDescribeRequest(group_ids=[group])).body
        (d,) = described.groups
        assert (d.error_code, d.group_state, d.assignor_name) == (0, "Stable", "simple")
        assert sorted(m.member_id for m in d.members) == sorted([a, b])
        assert all(m.assignment.topic_partitions[0].topic_name == TOPIC for m in d.members)
        listed = client.request(16, 5, lg.ListGroupsRequest(types_filter=["share"])).body
        rows = [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups]
        assert (group, "share", "Stable", "share") in rows
        assert all(row[3] == "share" for row in rows)
        refused = client.request(42, 2, dg.DeleteGroupsRequest(groups_names=[group])).body
        assert refused.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
        for member in (a, b):
            leave = sh.ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
            assert client.request(76, 1, leave).body.member_epoch == -1
        deleted = client.request(42, 2, dg.DeleteGroupsRequest(groups_names=[group])).body
        assert deleted.results[0].error_code == 0
        gone = client.request(77, 1, sd.ShareGroupDescribeRequest(group_ids=[group])).body
        assert gone.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def _fetch(
    client: RawClient, group: str, member: str, epoch: int, topic_id: uuid.UUID
) -> sf.ShareFetchResponse:
    request = sf.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=0,
        max_records=100,
        topics=[
            sf.FetchTopic(topic_id=topic_id, partitions=[sf.FetchPartition(partition_index=0)])
        ],
    )
    body: sf.ShareFetchResponse = client.request(78, 1, request).body
    return body


def _ack(
    client: RawClient, group: str, member: str, epoch: int, topic_id: uuid.UUID, last: int
) -> sa.ShareAcknowledgeResponse:
    batch = sa.AcknowledgementBatch(first_offset=0, last_offset=last, acknowledge_types=[1])
    request = sa.ShareAcknowledgeRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        topics=[
            sa.AcknowledgeTopic(
                topic_id=topic_id,
                partitions=[
                    sa.AcknowledgePartition(partition_index=0, acknowledgement_batches=[batch])
                ],
            )
        ],
    )
    body: sa.ShareAcknowledgeResponse = client.request(79, 1, request).body
    return body


def test_share_session_epochs_and_acknowledgement(broker: EmbeddedBroker) -> None:
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id
    with RawClient(broker.bootstrap) as client:
        assert _join(client, group, member).error_code == 0
        no_session = _fetch(client, group, member, 1, topic_id)
        assert no_session.error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
        opened = _fetch(client, group, member, 0, topic_id)  # starts at the log end (latest)
        assert opened.error_code == 0
        produce = pr.ProduceRequest(
            acks=-1,
            timeout=5000,
            topic_data=[
                pr.TopicProduceData(
                    name=TOPIC,
                    partition_data=[
                        pr.PartitionProduceData(
                            index=0, records=build_batch([SimpleRecord(b"k", b"v")] * 3)
                        )
                    ],
                )
            ],
        )
        start = client.request(0, 9, produce).body.responses[0].partition_responses[0].base_offset
        fetched = _fetch(client, group, member, 1, topic_id)
        (data,) = fetched.responses[0].partitions
        assert [
            (a.first_offset, a.last_offset, a.delivery_count) for a in data.acquired_records
        ] == [(start, start + 2, 1)]
        assert fetched.acquisition_lock_timeout == 30000
        opening_ack = _ack(client, group, member, 0, topic_id, start + 2)
        assert opening_ack.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        stale = _ack(client, group, member, 1, topic_id, start + 2)
        assert stale.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
        accepted = _ack(client, group, member, 2, topic_id, start + 2)
        assert accepted.error_code == 0
        assert accepted.responses[0].partitions[0].error_code == 0
        again = _ack(client, group, member, 3, topic_id, start + 2)
        assert again.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
        closed = _ack(client, group, member, -1, topic_id, start + 2)
        assert closed.error_code == 0
        assert _fetch(client, group, member, 4, topic_id).error_code == (
            ErrorCode.SHARE_SESSION_NOT_FOUND
        )
        # Closing a session that is gone (the member left first) is no error; what the
        # member no longer holds answers per partition.
        gone = _ack(client, group, member, -1, topic_id, start + 2)
        assert gone.error_code == 0
        assert gone.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE


def test_restart_neither_loses_nor_duplicates_accepted_records(tmp_path: Path) -> None:
    """Share-partition state survives a restart through ``__share_group_state``: accepted
    and rejected records never return; what was acquired and not acknowledged returns with
    its delivery counted; the start offset (latest at the first fetch) is kept."""
    group, member = "restarted", uuid.uuid4().hex
    data_dir = tmp_path / "d"
    with EmbeddedBroker(data_dir) as b, RawClient(b.bootstrap) as client:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        topic_id = b.broker.topics.get(TOPIC).topic_id
        _produce(client, 2)  # before the group's first fetch: never delivered (latest)
        assert _join(client, group, member).error_code == 0
        assert _fetch(client, group, member, 0, topic_id).error_code == 0
        _produce(client, 5)  # offsets 2-6
        (data,) = _fetch(client, group, member, 1, topic_id).responses[0].partitions
        assert [(a.first_offset, a.last_offset) for a in data.acquired_records] == [(2, 6)]
        batch = sa.AcknowledgementBatch(first_offset=2, last_offset=4, acknowledge_types=[1, 3, 1])
        request = sa.ShareAcknowledgeRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=2,
            topics=[
                sa.AcknowledgeTopic(
                    topic_id=topic_id,
                    partitions=[
                        sa.AcknowledgePartition(partition_index=0, acknowledgement_batches=[batch])
                    ],
                )
            ],
        )
        assert client.request(79, 1, request).body.responses[0].partitions[0].error_code == 0
    with EmbeddedBroker(data_dir) as b, RawClient(b.bootstrap) as client:
        assert _join(client, group, member).error_code == 0
        (data,) = _fetch(client, group, member, 0, topic_id).responses[0].partitions
        assert [
            (a.first_offset, a.last_offset, a.delivery_count) for a in data.acquired_records
        ] == [(5, 6, 2)]


def _produce(client: RawClient, count: int) -> None:
    produce = pr.ProduceRequest(
        acks=-1,
        timeout=5000,
        topic_data=[
            pr.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    pr.PartitionProduceData(
                        index=0, records=build_batch([SimpleRecord(b"k", b"v")] * count)
                    )
                ],
            )
        ],
    )
    answer = client.request(0, 9, produce).body
    assert answer.responses[0].partition_responses[0].error_code == 0


def test_cli_lists_describes_and_deletes_a_share_group(
    broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    group, member = f"cli-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with RawClient(broker.bootstrap) as client:
        assert _join(client, group, member).error_code == 0

        def cli(*argv: str) -> tuple[int, str, str]:
            capsys.readouterr()
            rc = main(["groups", *argv, "-b", broker.bootstrap])
            out, err = capsys.readouterr()
            return rc, out, err

        rc, out, _ = cli("list")
        assert rc == 0 and any(
            line.split()[:4] == [group, "Stable", "share", "share"] for line in out.splitlines()
        )
        rc, out, _ = cli("describe", group)
        assert rc == 0
        assert f"{group} share simple Stable" in " ".join(out.split())
        assert member in out and f"{TOPIC}:0" in out
        rc, _, err = cli("delete", group)
        assert rc == 1 and "NON_EMPTY_GROUP" in err
        leave = sh.ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
        client.request(76, 1, leave)
        assert cli("delete", group)[0] == 0
        rc, _, err = cli("describe", group)
        assert rc == 1 and "does not exist" in err


def test_cli_resets_a_share_groups_start_offsets(
    broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    """``groups reset-offsets`` finds a share group and sets its start offsets with
    AlterShareGroupOffsets: refused while it has a member, then the next fetch starts there."""
    group, member = f"reset-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    topic_id = broker.broker.topics.get(TOPIC).topic_id

    def cli(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main(
            ["groups", "reset-offsets", group, "--topic", TOPIC, *argv, "-b", broker.bootstrap]
        )
        out, err = capsys.readouterr()
        return rc, out, err

    with RawClient(broker.bootstrap) as client:
        _produce(client, 3)
        assert _join(client, group, member).error_code == 0
        opened = _fetch(client, group, member, 0, topic_id)  # starts at the log end (latest)
        assert opened.error_code == 0
        end = broker.broker.share_groups.partitions.get(group, topic_id, 0).start_offset
        assert end >= 3
        rc, out, err = cli("--to-earliest")  # a dry run: prints, changes nothing
        assert rc == 0 and "Dry run" in err and "1 member(s)" in err
        assert [group, TOPIC, "0", str(end), "0"] in [line.split() for line in out.splitlines()]
        rc, _, err = cli("--to-earliest", "--execute")
        assert rc == 1 and "it has 1 member(s)" in err
        leave = sh.ShareGroupHeartbeatRequest(group_id=group, member_id=member, member_epoch=-1)
        client.request(76, 1, leave)
        rc, out, _ = cli("--to-earliest", "--execute")
        assert rc == 0 and f"Set new start offsets for share group '{group}'" in out
        capsys.readouterr()
        assert main(["groups", "describe", group, "-b", broker.bootstrap]) == 0
        shown = [line.split() for line in capsys.readouterr().out.splitlines()]
        assert [group, TOPIC, "0", "0", str(end)] in shown  # start offset 0, lag = the log
        again = uuid.uuid4().hex
        assert _join(client, group, again).error_code == 0
        (data,) = _fetch(client, group, again, 0, topic_id).responses[0].partitions
        assert data.acquired_records[0].first_offset == 0


def test_share_state_apis_round_trip(broker: EmbeddedBroker) -> None:
    """The share coordinator's APIs (83-87) as a partition leader of another node would call
    them: write, read (a higher leader epoch fences the older one), summary, initialize at a
    higher state epoch, delete."""
    from pydmq.protocol.messages import delete_share_group_state as ds
    from pydmq.protocol.messages import initialize_share_group_state as ini
    from pydmq.protocol.messages import read_share_group_state as rs
    from pydmq.protocol.messages import read_share_group_state_summary as rss
    from pydmq.protocol.messages import write_share_group_state as ws

    group, topic_id = f"state-{uuid.uuid4().hex[:8]}", uuid.uuid4()

    def one(key: int, version: int, request: object) -> object:
        with RawClient(broker.bootstrap) as client:
            (result,) = client.request(key, version, request).body.results[0].partitions
        return result

    def write(leader_epoch: int, state_epoch: int, start: int) -> int:
        batch = ws.StateBatch(
            first_offset=start, last_offset=start + 2, delivery_state=2, delivery_count=1
        )
        partition = ws.PartitionData(
            partition=0,
            state_epoch=state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start,
            delivery_complete_count=3,
            state_batches=[batch],
        )
        request = ws.WriteShareGroupStateRequest(
            group_id=group, topics=[ws.WriteStateData(topic_id=topic_id, partitions=[partition])]
        )
        return int(one(85, 1, request).error_code)  # type: ignore[attr-defined]

    def read(leader_epoch: int) -> rs.PartitionResult:
        partition = rs.PartitionData(partition=0, leader_epoch=leader_epoch)
        request = rs.ReadShareGroupStateRequest(
            group_id=group, topics=[rs.ReadStateData(topic_id=topic_id, partitions=[partition])]
        )
        return one(84, 0, request)  # type: ignore[return-value]

    assert read(0).start_offset == -1  # nothing yet
    assert write(1, 0, 10) == ErrorCode.NONE
    found = read(2)  # a new leader: its epoch is recorded
    assert found.error_code == ErrorCode.NONE and found.start_offset == 10
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in found.state_batches] == [
        (10, 12, 2)
    ]
    assert write(1, 0, 11) == ErrorCode.FENCED_LEADER_EPOCH
    summary = one(
        87,
        1,
        rss.ReadShareGroupStateSummaryRequest(
            group_id=group,
            topics=[
                rss.ReadStateSummaryData(
                    topic_id=topic_id, partitions=[rss.PartitionData(partition=0, leader_epoch=-1)]
                )
            ],
        ),
    )
    assert (summary.start_offset, summary.leader_epoch, summary.delivery_complete_count) == (  # type: ignore[attr-defined]
        10,
        2,
        3,
    )
    initialize = ini.InitializeShareGroupStateRequest(
        group_id=group,
        topics=[
            ini.InitializeStateData(
                topic_id=topic_id,
                partitions=[ini.PartitionData(partition=0, state_epoch=1, start_offset=50)],
            )
        ],
    )
    assert one(83, 0, initialize).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert read(2).start_offset == 50 and read(2).state_batches == []
    assert write(2, 0, 60) == ErrorCode.FENCED_STATE_EPOCH
    delete = ds.DeleteShareGroupStateRequest(
        group_id=group,
        topics=[ds.DeleteStateData(topic_id=topic_id, partitions=[ds.PartitionData(partition=0)])],
    )
    assert one(86, 0, delete).error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert read(2).start_offset == -1


def test_an_acknowledgement_not_persisted_is_answered_with_the_write_error(
    tmp_path: Path,
) -> None:
    """A ShareAcknowledge, and a ShareFetch carrying acknowledgements, is answered only once
    the new state is written at the share coordinator: a write that fails (here the storage:
    KAFKA_STORAGE_ERROR) is the partition's error, never a success the client would trust."""
    group, member = f"g-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with EmbeddedBroker(tmp_path / "d") as b:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        topic_id = b.broker.topics.get(TOPIC).topic_id
        with RawClient(b.bootstrap) as client:
            assert _join(client, group, member).error_code == 0
            assert _fetch(client, group, member, 0, topic_id).error_code == 0  # starts at 0
            _produce(client, 4)
            (data,) = _fetch(client, group, member, 1, topic_id).responses[0].partitions
            assert data.acquired_records[0].first_offset == 0

            async def failing_write(key: object, value: object) -> int:
                return ErrorCode.KAFKA_STORAGE_ERROR

            b.broker.share_persister.write = failing_write  # type: ignore[method-assign]
            (answer,) = _ack(client, group, member, 2, topic_id, 1).responses[0].partitions
            assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            batch = sf.AcknowledgementBatch(first_offset=2, last_offset=3, acknowledge_types=[1])
            request = sf.ShareFetchRequest(
                group_id=group,
                member_id=member,
                share_session_epoch=3,
                max_wait=0,
                topics=[
                    sf.FetchTopic(
                        topic_id=topic_id,
                        partitions=[
                            sf.FetchPartition(partition_index=0, acknowledgement_batches=[batch])
                        ],
                    )
                ],
            )
            body = client.request(78, 1, request).body
            (data,) = body.responses[0].partitions
            assert data.acknowledge_error_code == ErrorCode.KAFKA_STORAGE_ERROR
