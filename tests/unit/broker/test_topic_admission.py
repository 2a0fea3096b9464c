"""Single-node topic creation: admission limits, all or nothing, and never holding the loop.

Requests go through the broker's handlers to the node's own controller, in process
(:mod:`support.admin_requests`); operations run one at a time.

Measured on af52f34: CreateTopics with 100,000 partitions ran out of descriptors half-way and
left a half-created topic that broke every restart; 1,000,000 partitions got "Number of
partitions must be larger than 0"; 10,000 partitions held the event loop 2.5 s; Metadata
auto-creation saved the registry once per topic.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from pydmq.api.handler import RequestContext
from pydmq.broker.handlers import metadata
from pydmq.broker.partition_creation import OPEN_CHUNK
from pydmq.broker.server import Broker
from pydmq.config import BrokerConfig
from pydmq.engines.segment import SegmentStorageEngine
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.records import MetadataRecord
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
)
from pydmq.storage.api import LogConfig, PartitionLog, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from support.admin_requests import create, delete, grow
from support.nodes import broker_of

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Broker]:
    overrides = getattr(request, "param", {})
    config = BrokerConfig(
        {"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0", **overrides}
    )
    node = broker_of(config)
    yield node
    node.replica_manager.shutdown()


def partition_dirs(broker: Broker, topic: str) -> list[str]:
    return [name for name in os.listdir(broker.log_dir) if name.startswith(f"{topic}-")]


def registered(broker: Broker, topic: str) -> bool:
    assert broker.local_controller is not None
    saved = broker.local_controller.image.topics.by_name
    return broker.topics.get(topic) is not None or topic in saved


def hosted(broker: Broker, topic: str) -> int:
    return sum(1 for tp in broker.replica_manager.partitions if tp.topic == topic)


def test_a_million_partitions_gets_the_request_limit(broker: Broker) -> None:
    with pytest.raises(TopicError) as refused:
        broker.topic_creator.create_topic("huge", 1_000_000)
    assert refused.value.error_code == ErrorCode.POLICY_VIOLATION
    assert "1000000 partitions" in refused.value.message and "10000" in refused.value.message
    with pytest.raises(TopicError) as zero:
        broker.topic_creator.create_topic("none", 0)
    assert zero.value.error_code == ErrorCode.INVALID_PARTITIONS
    assert hosted(broker, "huge") == 0 and broker.topics.get("huge") is None


@pytest.mark.parametrize("broker", [{"pydmq.max.broker.partitions": 100}], indirect=True)
def test_the_node_limit_counts_what_is_hosted(broker: Broker) -> None:
    broker.topic_creator.create_topic("a", 60)
    with pytest.raises(TopicError) as refused:
        broker.topic_creator.create_topic("b", 50)
    assert refused.value.error_code == ErrorCode.POLICY_VIOLATION
    assert "hosts 60 partitions" in refused.value.message
    assert "limit of 100 (pydmq.max.broker.partitions)" in refused.value.message
    assert broker.topics.get("b") is None and hosted(broker, "b") == 0

    [grown, unknown] = asyncio.run(grow(broker, {"a": 90, "a2": 5}))
    assert grown.error_code == ErrorCode.NONE and hosted(broker, "a") == 90
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    [over] = asyncio.run(grow(broker, {"a": 111}))
    assert over.error_code == ErrorCode.POLICY_VIOLATION
    assert len(broker.topics.get("a").partitions) == 90  # type: ignore[union-attr]


@pytest.mark.parametrize("broker", [{"pydmq.max.broker.partitions": 100}], indirect=True)
def test_the_limits_count_the_earlier_topics_of_a_request(broker: Broker) -> None:
    a, b, c = asyncio.run(create(broker, {"a": 60, "b": 50, "c": 30}))
    assert a.error_code == c.error_code == ErrorCode.NONE
    assert b.error_code == ErrorCode.POLICY_VIOLATION
    assert len(broker.replica_manager.partitions) == 90


def failing_at(monkeypatch: pytest.MonkeyPatch, nth: int, error: OSError) -> list[TopicPartition]:
    """Make the segment engine's ``nth`` open_log raise ``error``; the first logs opened
    before it write a checkpoint (as an engine creating files at open would): on disk."""
    real = SegmentStorageEngine.open_log
    opened: list[TopicPartition] = []

    def open_log(self: SegmentStorageEngine, tp: TopicPartition, config: LogConfig) -> PartitionLog:
        if len(opened) + 1 == nth:
            raise error
        log = real(self, tp, config)
        if len(opened) < 10:
            log.write_checkpoint("probe", b"1")
        opened.append(tp)
        return log

    monkeypatch.setattr(SegmentStorageEngine, "open_log", open_log)
    return opened


def test_a_creation_failing_half_way_leaves_nothing(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = failing_at(monkeypatch, 7, OSError(errno.EMFILE, "Too many open files"))
    with pytest.raises(TopicError) as failed:
        broker.topic_creator.create_topic("half", 10)
    assert len(opened) == 6  # six logs were on disk when the seventh failed
    assert failed.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "half-6" in failed.value.message and "Too many open files" in failed.value.message
    assert partition_dirs(broker, "half") == []
    assert not registered(broker, "half") and hosted(broker, "half") == 0
    monkeypatch.undo()
    broker.topic_creator.create_topic("half", 10)  # the name is free, the node intact
    assert hosted(broker, "half") == 10 and registered(broker, "half")


def test_a_failing_request_creates_none_of_its_topics(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_at(monkeypatch, 2 * OPEN_CHUNK + 5, OSError(errno.ENOSPC, "No space left"))

    results = asyncio.run(create(broker, {"x": OPEN_CHUNK, "y": 400}))
    assert {r.error_code for r in results} == {ErrorCode.KAFKA_STORAGE_ERROR}
    [message] = {r.error_message for r in results}  # every topic answers the same text
    assert message == (
        f"Storage error opening y-{OPEN_CHUNK + 4}: [Errno 28] No space left. "
        "Nothing of this request was created."
    )
    for name in ("x", "y"):
        assert partition_dirs(broker, name) == [] and not registered(broker, name)
    assert broker.replica_manager.partitions == {}


def test_a_failing_registry_save_removes_the_partitions(
    broker: Broker, arm_failpoints: Callable[[str], None]
) -> None:
    arm_failpoints("raft.append.write=enospc")
    with pytest.raises(TopicError) as failed:
        broker.topic_creator.create_topic("t", 5)
    assert failed.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.topics.get("t") is None and broker.replica_manager.partitions == {}


def test_creation_lets_the_loop_serve_others_between_chunks(broker: Broker) -> None:
    async def run() -> tuple[int, object]:
        ticks = 0
        done = False

        async def other_connection() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(other_connection())
        await asyncio.sleep(0)
        ticks = 0
        [result] = await create(broker, {"t": 8 * OPEN_CHUNK})
        done = True
        await other
        return ticks, result.error_code

    ticks, code = asyncio.run(run())
    assert code == ErrorCode.NONE
    assert ticks >= 7  # served between every two of the eight chunks
    assert hosted(broker, "t") == 8 * OPEN_CHUNK


def test_a_cancelled_creation_leaves_nothing_and_the_next_operation_waited_for_it(
    broker: Broker,
) -> None:
    """Operations run one at a time: a CreateTopics of the same name sent while the first
    opens its partitions waits for it (the group coordinator's synchronous creation is
    refused meanwhile, retriable); the first, cancelled, leaves nothing, so the second
    creates the name."""

    async def run() -> None:
        first = asyncio.create_task(create(broker, {"t": 8 * OPEN_CHUNK}))
        for _ in range(3):
            await asyncio.sleep(0)
        assert 0 < hosted(broker, "t") < 8 * OPEN_CHUNK
        second = asyncio.create_task(create(broker, {"t": 3}))
        with pytest.raises(TopicError) as busy:
            broker.topic_creator.create_topic("t", 1)
        assert busy.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        for _ in range(3):
            await asyncio.sleep(0)
        assert not second.done()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        [created] = await second
        assert created.error_code == ErrorCode.NONE and created.num_partitions == 3

    asyncio.run(run())
    assert hosted(broker, "t") == 3 and registered(broker, "t")


def metadata_request(broker: Broker, names: list[str]) -> dict[str, int]:
    ctx = RequestContext(broker.services, 3, 12, 1, "test", "127.0.0.1", 1, "PLAINTEXT", 1)
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=True
    )
    answer = metadata.handle(ctx, request)

    async def wait() -> MetadataResponse:
        assert not isinstance(answer, MetadataResponse)  # auto-creation answers later
        return await answer

    response = answer if isinstance(answer, MetadataResponse) else asyncio.run(wait())
    return {t.name: t.error_code for t in response.topics if t.name is not None}


@pytest.mark.parametrize(
    "broker", [{"pydmq.auto.create.max.partitions": 20, "num.partitions": 2}], indirect=True
)
def test_metadata_auto_creates_within_its_budget(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves = 0
    assert broker.local_controller is not None
    real = broker.local_controller.metadata_log.append

    def counting(records: Sequence[MetadataRecord]) -> MetadataDelta:
        nonlocal saves
        saves += 1
        return real(records)

    monkeypatch.setattr(broker.local_controller.metadata_log, "append", counting)
    names = [f"auto-{i}" for i in range(25)]
    first = metadata_request(broker, names)
    # Every name is answered as being created (Kafka 4.4's UNKNOWN_TOPIC_OR_PARTITION);
    # ten topics (20 partitions) were created, with one metadata log entry.
    assert set(first.values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert [n for n in names if broker.topics.get(n) is not None] == names[:10]
    assert saves == 1
    second = metadata_request(broker, names)
    assert sum(1 for code in second.values() if code == ErrorCode.NONE) == 10
    third = metadata_request(broker, names)
    assert sum(1 for code in third.values() if code == ErrorCode.NONE) == 20
    fourth = metadata_request(broker, names)
    assert set(fourth.values()) == {ErrorCode.NONE}
    assert len(broker.replica_manager.partitions) == 50


def test_a_deletion_waits_for_the_growth_in_progress(broker: Broker) -> None:
    """A DeleteTopics sent while a CreatePartitions opens its partitions runs after it (Kafka's
    controller queue): the growth completes whole, then the topic is deleted with every
    partition, the old and the new."""
    broker.topic_creator.create_topic("a", 1)
    broker.topic_creator.create_topic("b", 1)
    committed: list[str] = []  # the metadata log's entries, in order
    assert broker.local_controller is not None
    broker.local_controller.add_listener(
        lambda image, delta: committed.append(
            "deleted" if delta.deleted_topics() else f"grown to {hosted(broker, 'a')}"
        )
    )

    async def run() -> tuple[list[int], list[int]]:
        growth = asyncio.create_task(grow(broker, {"a": 1 + 8 * OPEN_CHUNK, "b": 3}))
        for _ in range(3):
            await asyncio.sleep(0)
        assert 1 < hosted(broker, "a") < 1 + 4 * OPEN_CHUNK  # being opened
        deletion = asyncio.create_task(delete(broker, ["a"]))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not deletion.done() and broker.topics.get("a") is not None
        grown = [r.error_code for r in await growth]
        deleted = [r.error_code for r in await deletion]
        return grown, deleted

    grown, deleted = asyncio.run(run())
    assert grown == [ErrorCode.NONE, ErrorCode.NONE] and deleted == [ErrorCode.NONE]
    assert committed == [f"grown to {1 + 8 * OPEN_CHUNK}", "deleted"]
    assert hosted(broker, "b") == 3
    assert hosted(broker, "a") == 0 and not registered(broker, "a")
    assert partition_dirs(broker, "a") == []


def test_a_deletion_of_many_names_lets_the_loop_serve_others(broker: Broker) -> None:
    """DeleteTopics of 15,001 names (the controller deletes them 5,000 per operation): other
    tasks run between the slices, and every name is answered in order."""
    broker.topic_creator.create_topic("kept", 1)
    names = [f"missing-{i}" for i in range(15_000)] + ["kept"]

    async def run() -> tuple[int, list[int]]:
        ticks = 0
        done = False

        async def other_connection() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(other_connection())
        await asyncio.sleep(0)
        ticks = 0
        results = await delete(broker, names)
        done = True
        await other
        assert [r.name for r in results] == names
        return ticks, [r.error_code for r in results]

    ticks, codes = asyncio.run(run())
    assert ticks >= 3  # served between the four slices
    assert codes == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 15_000 + [ErrorCode.NONE]
    assert broker.topics.get("kept") is None and hosted(broker, "kept") == 0


def test_the_offsets_topic_asked_while_the_controller_is_busy_is_being_created(
    broker: Broker,
) -> None:
    """A Metadata request naming ``__consumer_offsets`` while a creation opens its partitions:
    the group coordinator's synchronous creation waits for no one, so it is refused and the
    topic is answered as being created; the client's next request creates it."""
    offsets = "__consumer_offsets"

    async def run() -> int:
        creation = asyncio.create_task(create(broker, {"t": 8 * OPEN_CHUNK}))
        for _ in range(3):
            await asyncio.sleep(0)
        ctx = RequestContext(broker.services, 3, 12, 1, "test", "127.0.0.1", 1, "PLAINTEXT", 1)
        request = MetadataRequest(
            topics=[MetadataRequestTopic(name=offsets)], allow_auto_topic_creation=True
        )
        answer = metadata.handle(ctx, request)
        assert not isinstance(answer, MetadataResponse)
        [topic] = (await answer).topics
        assert topic.is_internal
        [created] = await creation
        assert created.error_code == ErrorCode.NONE
        return int(topic.error_code)

    assert asyncio.run(run()) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.topics.get(offsets) is None
    assert metadata_request(broker, [offsets]) == {offsets: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert broker.topics.get(offsets) is not None
