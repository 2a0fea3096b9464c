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
