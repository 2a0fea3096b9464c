"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
(92) on one embedded node, over the wire: alter creates the empty group and sets its start
offset, describe reports it (named partitions and all), a group with members is refused,
delete forgets the topic's state, an unknown group is GROUP_ID_NOT_FOUND."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages import alter_share_group_offsets as alt
from pydmq.protocol.messages import delete_share_group_offsets as dele
from pydmq.protocol.messages import describe_share_group_offsets as desc
from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages import share_group_heartbeat as sh
from pydmq.protocol.records import SimpleRecord, build_batch
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(30)

TOPIC = "offsets"


def _alter(client: RawClient, group: str, offset: int) -> alt.AlterShareGroupOffsetsResponse:
    request = alt.AlterShareGroupOffsetsRequest(
        group_id=group,
        topics=[
            alt.AlterShareGroupOffsetsRequestTopic(
                topic_name=TOPIC,
                partitions=[
                    alt.AlterShareGroupOffsetsRequestPartition(
                        partition_index=0, start_offset=offset
                    )
                ],
            )
        ],
    )
    body: alt.AlterShareGroupOffsetsResponse = client.request(91, 0, request).body
    return body


def _describe(
    client: RawClient, group: str, *, all_topics: bool
) -> desc.DescribeShareGroupOffsetsResponseGroup:
    topics = (
        None
        if all_topics
        else [desc.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0])]
    )
    request = desc.DescribeShareGroupOffsetsRequest(
        groups=[desc.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]
    )
    (answer,) = client.request(90, 1, request).body.groups
    result: desc.DescribeShareGroupOffsetsResponseGroup = answer
    return result


def _delete(client: RawClient, group: str) -> dele.DeleteShareGroupOffsetsResponse:
    request = dele.DeleteShareGroupOffsetsRequest(
        group_id=group, topics=[dele.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)]
    )
    body: dele.DeleteShareGroupOffsetsResponse = client.request(92, 0, request).body
    return body


def test_alter_describe_delete(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "d") as b, RawClient(b.bootstrap) as client:
        b.broker.topic_creator.create_topic(TOPIC, 1)
        produce = pr.ProduceRequest(
            acks=-1,
            timeout=5000,
            topic_data=[
                pr.TopicProduceData(
                    name=TOPIC,
                    partition_data=[
                        pr.PartitionProduceData(
                            index=0, records=build_batch([SimpleRecord(b"k", b"v")] * 10)
                        )
                    ],
                )
            ],
        )
        assert (
            client.request(0, 9, produce).body.responses[0].partition_responses[0].error_code == 0
        )
        assert _describe(client, "g", all_topics=True).error_code == ErrorCode.GROUP_ID_NOT_FOUND
        assert _delete(client, "g").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        altered = _alter(client, "g", 4)
        assert altered.error_code == 0
        assert altered.responses[0].partitions[0].error_code == 0
        for all_topics in (False, True):
            (topic,) = _describe(client, "g", all_topics=all_topics).topics
            (part,) = topic.partitions
            assert (topic.topic_name, part.start_offset, part.lag) == (TOPIC, 4, 6)
        member = uuid.uuid4().hex
        join = sh.ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=0, subscribed_topic_names=[TOPIC]
        )
        assert client.request(76, 1, join).body.error_code == 0
        assert _alter(client, "g", 2).error_code == ErrorCode.NON_EMPTY_GROUP
        assert _delete(client, "g").error_code == ErrorCode.NON_EMPTY_GROUP
        leave = sh.ShareGroupHeartbeatRequest(group_id="g", member_id=member, member_epoch=-1)
        assert client.request(76, 1, leave).body.error_code == 0
        deleted = _delete(client, "g")
        assert deleted.error_code == 0 and deleted.responses[0].error_code == 0
        assert _describe(client, "g", all_topics=True).topics == []
        (topic,) = _describe(client, "g", all_topics=False).topics
        assert topic.partitions[0].start_offset == -1
