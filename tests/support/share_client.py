"""Share group requests over a :class:`~support.raw_client.RawClient` (shared by the share
group tests): join, produce, ShareFetch bodies and the acquired runs of an answer."""

from __future__ import annotations

import uuid

from pydmq.protocol.messages import produce as pr
from pydmq.protocol.messages import share_fetch as sf
from pydmq.protocol.messages import share_group_heartbeat as sh
from pydmq.protocol.records import SimpleRecord, build_batch

from .raw_client import RawClient

__all__ = ["acquired", "fetch_request", "join", "produce"]


def join(client: RawClient, group: str, member: str, topic: str) -> sh.ShareGroupHeartbeatResponse:
    """ShareGroupHeartbeat at epoch 0, subscribed to ``topic``."""
    request = sh.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, subscribed_topic_names=[topic]
    )
    body: sh.ShareGroupHeartbeatResponse = client.request(76, 1, request).body
    return body


def produce(client: RawClient, topic: str, count: int) -> int:
    """One acks=-1 batch of ``count`` records to partition 0; its base offset."""
    request = pr.ProduceRequest(
        acks=-1,
        timeout=5000,
        topic_data=[
            pr.TopicProduceData(
                name=topic,
                partition_data=[
                    pr.PartitionProduceData(
                        index=0, records=build_batch([SimpleRecord(b"k", b"v")] * count)
                    )
                ],
            )
        ],
    )
    answer = client.request(0, 9, request).body.responses[0].partition_responses[0]
    assert answer.error_code == 0, answer.error_code
    return int(answer.base_offset)


def fetch_request(
    group: str, member: str, epoch: int, topic_id: uuid.UUID, max_wait: int = 0
) -> sf.ShareFetchRequest:
    """A ShareFetch of partition 0 of ``topic_id``, up to 100 records."""
    return sf.ShareFetchRequest(
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait,
        max_records=100,
        topics=[
            sf.FetchTopic(topic_id=topic_id, partitions=[sf.FetchPartition(partition_index=0)])
        ],
    )


def acquired(body: sf.ShareFetchResponse) -> list[tuple[int, int, int]]:
    """(first offset, last offset, delivery count) of every acquired run of the answer."""
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for topic in body.responses
        for p in topic.partitions
        for a in p.acquired_records
    ]
