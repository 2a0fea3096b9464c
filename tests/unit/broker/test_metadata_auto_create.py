"""Metadata auto-creation answers as Kafka 4.4 does, at every version (issue 23).

On 3209cc2 a single node answered the request that auto-created a topic with the new topic's
partitions (so a Metadata v1 request re-creating a topic just deleted came back with its
partitions already present). Kafka 4.4 answers that request, at v0-v13,
UNKNOWN_TOPIC_OR_PARTITION with no partitions and a zero topic id, and the next request
finds the topic (tests/interop/test_differential.py ``metadata_auto_create`` compares the
two brokers).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pydmq.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from pydmq.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(120)

ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    overrides = {"num.partitions": 2, "auto.create.topics.enable": True}
    with EmbeddedBroker(tmp_path_factory.mktemp("md") / "d", overrides=overrides) as broker:
        yield broker.bootstrap


def _ask(client: RawClient, version: int, name: str, allow: bool = True) -> tuple[int, int, bool]:
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=allow
    )
    (topic,) = client.request(3, version, request).body.topics
    if version >= 10 and topic.error_code:
        assert topic.topic_id == ZERO
    return int(topic.error_code), len(topic.partitions), bool(topic.is_internal)


@pytest.mark.parametrize("version", range(14))
def test_the_creating_request_answers_unknown_then_the_topic_is_there(
    bootstrap: str, version: int
) -> None:
    name = f"auto-v{version}-{uuid.uuid4().hex[:6]}"
    with RawClient(bootstrap) as client:
        assert _ask(client, version, name) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, False)
        assert _ask(client, version, name) == (ErrorCode.NONE, 2, False)


@pytest.mark.parametrize("version", range(4, 14))
def test_not_allowed_creates_nothing(bootstrap: str, version: int) -> None:
    name = f"none-v{version}-{uuid.uuid4().hex[:6]}"
    with RawClient(bootstrap) as client:
        for _ in range(2):
            assert _ask(client, version, name, allow=False) == (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                0,
                False,
            )


def test_recreated_after_delete_topics_is_answered_as_being_created(bootstrap: str) -> None:
    name = f"again-{uuid.uuid4().hex[:6]}"
    with RawClient(bootstrap) as client:
        _ask(client, 1, name)
        assert _ask(client, 1, name) == (ErrorCode.NONE, 2, False)
        deleted = client.request(
            20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name=name)], timeout=10_000)
        ).body
        assert [r.error_code for r in deleted.responses] == [ErrorCode.NONE]
        assert _ask(client, 1, name) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, False)
        assert _ask(client, 1, name) == (ErrorCode.NONE, 2, False)


def test_the_offsets_topic_is_created_by_its_owner_and_answered_alike(
    tmp_path: Path,
) -> None:
    overrides = {"offsets.topic.num.partitions": 3}
    with (
        EmbeddedBroker(tmp_path / "d", overrides=overrides) as broker,
        RawClient(broker.bootstrap) as client,
    ):
        assert _ask(client, 1, OFFSETS_TOPIC) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0, True)
        assert _ask(client, 1, OFFSETS_TOPIC) == (ErrorCode.NONE, 3, True)
