""" "All topics" Metadata answers encoded once per metadata version and reused (issue 21).

On 7aab26a every "all topics" Metadata request built and encoded the answer for every
partition again: 160 ms a request at 20,000 partitions, 860 ms at 100,000
(benchmarks/scale_partitions.py). The answer now comes from ``MetadataAnswerCache`` until the
metadata changes; these tests check that it is reused, that it is byte for byte the answer
built afresh at every version, that a change of the metadata is answered at once, and that
answers that depend on the client (an authorizer, a request quota) are not shared.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pydmq.api.handler import RawResponse, RequestContext
from pydmq.broker.cluster.metadata_cache import MetadataCache
from pydmq.broker.cluster.metadata_view import ClusterMetadataView
from pydmq.broker.handlers import describe_topic_partitions, metadata
from pydmq.broker.server import Broker
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pydmq.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
)
from pydmq.protocol.messages.describe_topic_partitions import TopicRequest as DtpTopicRequest
from pydmq.protocol.messages.describe_topic_partitions import (
    encode_response as encode_dtp_response,
)
from pydmq.protocol.messages.metadata import MetadataRequest, encode_response
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest
from pydmq.protocol.primitives import Writer
from pydmq.testing import EmbeddedBroker
from support.raw_client import RawClient

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    overrides = {"num.partitions": 3, "pydmq.http.listeners": "http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("answers") / "d", overrides=overrides) as b:
        b.run_on_loop(lambda: _create(b, "first", 3))
        yield b


async def _create(embedded: EmbeddedBroker, name: str, partitions: int) -> None:
    broker = embedded.broker
    assert isinstance(broker, Broker)
    broker.topic_creator.create_topic(name, partitions)


def _all_topics(embedded: EmbeddedBroker, version: int, *, operations: bool = False) -> Any:
    """The handler's answer to "all topics" at ``version``, called on the broker's loop."""
    broker = embedded.broker
    assert isinstance(broker, Broker)
    ctx = RequestContext(broker.services, 3, version, 1, "t", "127.0.0.1", 1, "PLAINTEXT", 1)
    request = MetadataRequest(
        topics=[] if version == 0 else None, include_topic_authorized_operations=operations
    )

    async def call() -> Any:
        return metadata.handle(ctx, request)

    return embedded.run_on_loop(call)


def _fresh_body(embedded: EmbeddedBroker, version: int, *, operations: bool = False) -> bytes:
    """The answer built and encoded afresh: what a request quota (answers not shared) gets."""
    broker = embedded.broker
    assert isinstance(broker, Broker)
    quota = broker.services.quotas.request
    quota.enabled = True
    try:
        response = _all_topics(embedded, version, operations=operations)
    finally:
        quota.enabled = False
    assert not isinstance(response, RawResponse)
    writer = Writer()
    encode_response(writer, response, version)
    return writer.getvalue()


def _body(answer: RawResponse) -> bytes:
    return b"".join(bytes(b) for b in answer.buffers)


def test_the_answer_is_encoded_once_and_reused_until_the_metadata_changes(
    embedded: EmbeddedBroker,
) -> None:
    first = _all_topics(embedded, 12)
    assert isinstance(first, RawResponse)
    assert _all_topics(embedded, 12) is first
    embedded.run_on_loop(lambda: _create(embedded, f"new-{uuid.uuid4().hex[:6]}", 2))
    after = _all_topics(embedded, 12)
    assert after is not first and after.size > first.size


@pytest.mark.parametrize("version", range(14))
def test_the_shared_answer_is_the_fresh_answer_at_every_version(
    embedded: EmbeddedBroker, version: int
) -> None:
    operations = version >= 8
    shared = _all_topics(embedded, version, operations=operations)
    assert isinstance(shared, RawResponse)
    assert _body(shared) == _fresh_body(embedded, version, operations=operations)
    if version >= 8:  # authorized operations asked or not: two answers
        other = _all_topics(embedded, version)
        assert _body(other) == _fresh_body(embedded, version)
        assert _body(other) != _body(shared)


def test_a_client_sees_a_topic_created_or_deleted_at_once(embedded: EmbeddedBroker) -> None:
    name = f"seen-{uuid.uuid4().hex[:6]}"
    with RawClient(embedded.bootstrap) as client:

        def names() -> set[str]:
            answer = client.request(3, 12, MetadataRequest(topics=None)).body
            return {t.name for t in answer.topics}

        assert name not in names()
        embedded.run_on_loop(lambda: _create(embedded, name, 1))
        assert name in names()
        deleted = client.request(
            20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name=name)], timeout=10_000)
        ).body
        assert [r.error_code for r in deleted.responses] == [ErrorCode.NONE]
        assert name not in names()


def test_a_cluster_brokers_version_changes_with_every_update_metadata() -> None:
    cache = MetadataCache(1)
    view = ClusterMetadataView(cache)
    before = view.image_version()
    cache.update(UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=1))
    assert view.image_version() != before


class _AllowAll:
    """An authorizer that allows everything and counts what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def authorize(self, *args: object) -> bool:
        self.asked += 1
        return True


def test_with_an_authorizer_each_request_is_answered_for_its_principal(
    embedded: EmbeddedBroker,
) -> None:
    broker = embedded.broker
    assert isinstance(broker, Broker)
    services = broker.services
    authorizer = _AllowAll()
    services.authorizer = authorizer  # type: ignore[assignment]
    try:
        for _ in range(2):
            answer = _all_topics(embedded, 12)
            assert not isinstance(answer, RawResponse)
            assert "first" in {t.name for t in answer.topics}
    finally:
        services.authorizer = None
    assert authorizer.asked >= 2


def _describe(embedded: EmbeddedBroker, request: DescribeTopicPartitionsRequest) -> Any:
    broker = embedded.broker
    assert isinstance(broker, Broker)
    ctx = RequestContext(broker.services, 75, 0, 1, "t", "127.0.0.1", 1, "PLAINTEXT", 1)

    async def call() -> Any:
        return describe_topic_partitions.handle(ctx, request)

    return embedded.run_on_loop(call)


def test_describe_topic_partitions_pages_are_encoded_once_and_follow_changes(
    embedded: EmbeddedBroker,
) -> None:
    """Every page of "all topics", followed by its cursor, is reused until the metadata
    changes, and is byte for byte the page built afresh."""
    broker = embedded.broker
    assert isinstance(broker, Broker)
    cursor: Cursor | None = None
    pages = 0
    while True:
        request = DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=2, cursor=cursor
        )
        shared = _describe(embedded, request)
        assert isinstance(shared, RawResponse)
        assert _describe(embedded, request) is shared
        broker.services.quotas.request.enabled = True
        try:
            fresh = _describe(embedded, request)
        finally:
            broker.services.quotas.request.enabled = False
        writer = Writer()
        encode_dtp_response(writer, fresh, 0)
        assert _body(shared) == writer.getvalue()
        pages += 1
        cursor = fresh.next_cursor
        if cursor is None:
            break
    assert pages >= 2
    first = DescribeTopicPartitionsRequest(topics=[], response_partition_limit=2000, cursor=None)
    before = _describe(embedded, first)
    name = f"dtp-{uuid.uuid4().hex[:6]}"
    embedded.run_on_loop(lambda: _create(embedded, name, 1))
    after = _describe(embedded, first)
    assert after is not before and name.encode() in _body(after)
    named = DescribeTopicPartitionsRequest(
        topics=[DtpTopicRequest(name=name)], response_partition_limit=2000, cursor=None
    )
    assert not isinstance(_describe(embedded, named), RawResponse)  # only all topics
