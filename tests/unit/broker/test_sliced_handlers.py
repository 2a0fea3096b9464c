"""Large requests handled in slices answer exactly what one pass would; duplicates are refused.

Requests of more than one slice (5,000 elements) and more than the inline decode budget
(10,000 elements: decoded off the loop) go through a real broker and socket: every element is
answered in request order. A partition named twice in ListOffsets, or a resource named twice
in DescribeConfigs, gets INVALID_REQUEST at every occurrence (Kafka's rule for ListOffsets;
without it one small request repeating a BROKER resource answers megabytes of configs).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.client import KafkaClient
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopic,
)
from pydmq.protocol.messages.delete_topics import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DeleteTopicState,
)
from pydmq.protocol.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
)
from pydmq.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from pydmq.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from pydmq.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
)
from pydmq.testing.embedded import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

MANY = 12_000  # past one slice and past the inline decode budget
TOPIC = "sliced"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClient]:
    data: Path = tmp_path_factory.mktemp("sliced")
    with (
        EmbeddedBroker(data, overrides={"auto.create.topics.enable": "false"}) as broker,
        KafkaClient(broker.bootstrap, timeout=60) as kafka,
    ):
        created = kafka.call(
            CreateTopicsRequest(
                topics=[CreatableTopic(name=TOPIC, num_partitions=3, replication_factor=1)],
                timeout=10_000,
            ),
            CreateTopicsResponse,
        )
        assert created.topics[0].error_code == ErrorCode.NONE
        yield kafka


def _list_offsets(partitions: list[ListOffsetsPartition]) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(name=TOPIC, partitions=partitions)]
    )


def test_list_offsets_of_many_partitions(client: KafkaClient) -> None:
    partitions = [ListOffsetsPartition(partition_index=i, timestamp=-1) for i in range(MANY)]
    response = client.call(_list_offsets(partitions), ListOffsetsResponse)
    answered = response.topics[0].partitions
    assert [p.partition_index for p in answered] == list(range(MANY))
    assert [p.error_code for p in answered[:3]] == [ErrorCode.NONE] * 3
    assert [p.offset for p in answered[:3]] == [0, 0, 0]
    assert {p.error_code for p in answered[3:]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_list_offsets_duplicate_partition_is_invalid_request(client: KafkaClient) -> None:
    partitions = [ListOffsetsPartition(partition_index=i, timestamp=-1) for i in (0, 1, 0)]
    response = client.call(_list_offsets(partitions), ListOffsetsResponse)
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.NONE, ErrorCode.INVALID_REQUEST]


def test_describe_configs_duplicate_resource_is_invalid_request(client: KafkaClient) -> None:
    topic = DescribeConfigsResource(resource_type=2, resource_name=TOPIC, configuration_keys=None)
    broker = DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)
    response = client.call(
        DescribeConfigsRequest(resources=[broker, topic, broker]), DescribeConfigsResponse
    )
    first, described, again = response.results
    assert first.error_code == again.error_code == ErrorCode.INVALID_REQUEST
    assert first.configs == again.configs == []
    assert described.error_code == ErrorCode.NONE and described.configs


def test_describe_configs_of_many_topics(client: KafkaClient) -> None:
    names = [TOPIC] + [f"missing-{i}" for i in range(MANY)]
    resources = [
        DescribeConfigsResource(resource_type=2, resource_name=n, configuration_keys=None)
        for n in names
    ]
    response = client.call(DescribeConfigsRequest(resources=resources), DescribeConfigsResponse)
    assert [r.resource_name for r in response.results] == names
    assert response.results[0].error_code == ErrorCode.NONE
    assert {r.error_code for r in response.results[1:]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_delete_records_of_many_partitions(client: KafkaClient) -> None:
    partitions = [DeleteRecordsPartition(partition_index=i, offset=0) for i in range(MANY)]
    response = client.call(
        DeleteRecordsRequest(
            topics=[DeleteRecordsTopic(name=TOPIC, partitions=partitions)], timeout=5000
        ),
        DeleteRecordsResponse,
    )
    answered = response.topics[0].partitions
    assert [p.partition_index for p in answered] == list(range(MANY))
    assert [p.error_code for p in answered[:3]] == [ErrorCode.NONE] * 3
    assert {p.error_code for p in answered[3:]} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_delete_topics_of_many_names(client: KafkaClient) -> None:
    names = [f"never-created-{i}" for i in range(MANY)]
    response = client.call(
        DeleteTopicsRequest(topics=[DeleteTopicState(name=n) for n in names], timeout=5000),
        DeleteTopicsResponse,
    )
    assert [r.name for r in response.responses] == names
    assert {r.error_code for r in response.responses} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_offset_commit_and_fetch_of_many(client: KafkaClient) -> None:
    topics = [
        OffsetCommitRequestTopic(
            name=TOPIC if i == 0 else f"absent-{i}",
            partitions=[OffsetCommitRequestPartition(partition_index=0, committed_offset=7)],
        )
        for i in range(MANY // 2)
    ]
    committed = client.call(
        OffsetCommitRequest(
            group_id="sliced-group", generation_id_or_member_epoch=-1, topics=topics
        ),
        OffsetCommitResponse,
    )
    assert [t.name for t in committed.topics] == [t.name for t in topics]
    assert committed.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert {t.partitions[0].error_code for t in committed.topics[1:]} == {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    }
    groups = [OffsetFetchRequestGroup(group_id=f"group-{i}", topics=None) for i in range(MANY)]
    groups[-1] = OffsetFetchRequestGroup(group_id="sliced-group", topics=None)
    fetched = client.call(OffsetFetchRequest(groups=groups), OffsetFetchResponse)
    assert [g.group_id for g in fetched.groups] == [g.group_id for g in groups]
    (last_topic,) = fetched.groups[-1].topics
    assert last_topic.name == TOPIC and last_topic.partitions[0].committed_offset == 7
