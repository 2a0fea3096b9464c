"""LocalController: a single node runs the controller's operations on its local metadata log,
one at a time, preparing (opening partitions) before each commit, all or nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.controller.errors import ControllerError
from pydmq.controller.local import CommitPreparer, LocalController
from pydmq.controller.local_log import LocalMetadataLog
from pydmq.controller.operations import CreatableTopic, create_topics, delete_topics
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.metadata.records import MetadataRecord
from pydmq.plugins.host import PluginHost
from pydmq.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


def open_controller(directory: Path, prepare: CommitPreparer | None = None) -> LocalController:
    metadata_log = LocalMetadataLog(directory, snapshot_interval_records=1000)
    return LocalController(
        metadata_log, BrokerConfig(), PluginHost(load_entry_points=False), prepare
    )


def test_the_node_registers_once_as_the_one_unfenced_broker(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    controller.register_node(1, None)
    [registration] = controller.image.brokers.values()
    assert (registration.id, registration.fenced, registration.rack) == (1, False, None)
    end = controller.image.offset
    controller.metadata_log.close()

    restarted = open_controller(tmp_path)
    restarted.register_node(1, None)
    assert restarted.image.offset == end  # nothing appended: already registered
    restarted.register_node(2, "r1")  # node.id and broker.rack changed
    assert [(b.id, b.rack, b.fenced) for b in restarted.image.brokers.values()] == [
        (2, "r1", False)
    ]


def test_operations_commit_their_records_and_reach_the_listeners(tmp_path: Path) -> None:
    controller = open_controller(tmp_path)
    controller.register_node(1, None)
    seen: list[tuple[dict[uuid.UUID, str], list[str]]] = []

    def listener(image: MetadataImage, delta: MetadataDelta) -> None:
        assert image is controller.image
        seen.append(
            (dict(delta.created_topics()), [t.name for t in delta.deleted_topics().values()])
        )

    controller.add_listener(listener)
    context = controller.operation_context
    [created] = asyncio.run(
        controller.run(lambda image: create_topics(image, context, [CreatableTopic("t", 2)]))
    )
    assert created.error_code == ErrorCode.NONE
    [deleted] = asyncio.run(controller.run(lambda image: delete_topics(image, context, ["t"])))
    assert deleted.error_code == ErrorCode.NONE
    assert seen == [({created.topic_id: "t"}, []), ({}, ["t"])]
    controller.metadata_log.close()
    assert not open_controller(tmp_path).image.topics.by_name  # replayed: created, deleted


class Opening:
    """A preparation of fake partition openings: ``steps`` yields after each, failing at
    ``fail_at`` (an index) if set; what was opened and rolled back is recorded."""

    def __init__(self, records: Sequence[MetadataRecord], fail_at: int | None) -> None:
        self.count = len(records)
        self.fail_at = fail_at
        self.opened = 0
        self.rolled_back = False

    def steps(self) -> Iterator[None]:
        for index in range(self.count):
            if index == self.fail_at:
                raise OSError(28, "No space left on device")
            self.opened += 1
            yield

    def rollback(self) -> None:
        self.rolled_back = True
        self.opened = 0

    def failure(self, exc: BaseException) -> str:
        return f"opening failed: {exc}"


def preparer(made: list[Opening], fail_at: int | None = None) -> CommitPreparer:
    def prepare(image: MetadataImage, records: Sequence[MetadataRecord]) -> Opening:
        made.append(Opening(records, fail_at))
        return made[-1]

    return prepare


def create(controller: LocalController, name: str, partitions: int) -> object:
    context = controller.operation_context
    return controller.run(
        lambda image: create_topics(image, context, [CreatableTopic(name, partitions)])
    )


def test_a_failed_preparation_is_rolled_back_and_nothing_committed(tmp_path: Path) -> None:
    made: list[Opening] = []
    controller = open_controller(tmp_path, preparer(made, fail_at=3))
    controller.register_node(1, None)
    end = controller.image.offset
    with pytest.raises(ControllerError) as refused:
        asyncio.run(create(controller, "t", 5))  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert refused.value.message == "opening failed: [Errno 28] No space left on device"
    assert made[0].rolled_back and made[0].opened == 0
    assert controller.image.offset == end and not controller.image.topics.by_name


def test_a_cancelled_operation_is_rolled_back_and_the_next_one_runs(tmp_path: Path) -> None:
    made: list[Opening] = []
    controller = open_controller(tmp_path, preparer(made))
    controller.register_node(1, None)

    async def run() -> None:
        first = asyncio.ensure_future(create(controller, "t", 50))  # type: ignore[arg-type]
        for _ in range(5):
            await asyncio.sleep(0)
        assert 0 < made[0].opened < 50
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert made[0].rolled_back and not controller.image.topics.by_name
        [again] = await create(controller, "t", 2)  # type: ignore[misc]
        assert again.error_code == ErrorCode.NONE

    asyncio.run(run())
    assert list(controller.image.topics.by_name) == ["t"]


def test_operations_run_one_at_a_time_each_seeing_the_one_before(tmp_path: Path) -> None:
    """A second operation sent while the first prepares waits for its commit and runs on the
    image that holds it: the same name is then TOPIC_ALREADY_EXISTS. Meanwhile a synchronous
    ``run_now`` is refused."""
    made: list[Opening] = []
    controller = open_controller(tmp_path, preparer(made))
    controller.register_node(1, None)

    async def run() -> tuple[int, int]:
        first = asyncio.ensure_future(create(controller, "t", 20))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        second = asyncio.ensure_future(create(controller, "t", 1))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert 0 < made[0].opened < 20 and len(made) == 1
        with pytest.raises(ControllerError) as busy:
            controller.run_now(lambda image: create_topics(image, context, []))
        assert busy.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        [created] = await first
        [refused] = await second
        return created.error_code, refused.error_code

    context = controller.operation_context
    assert asyncio.run(run()) == (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
    assert len(made) == 1  # the refused creation had nothing to prepare


def test_a_listener_failing_after_the_commit_does_not_undo_the_preparation(
    tmp_path: Path,
) -> None:
    """Once the entry is in the log the partitions it creates must stay open: a listener that
    raises while applying the delta reaches the caller, and nothing is rolled back."""
    made: list[Opening] = []
    controller = open_controller(tmp_path, preparer(made))
    controller.register_node(1, None)

    def failing(image: MetadataImage, delta: MetadataDelta) -> None:
        raise RuntimeError("listener failed")

    controller.add_listener(failing)
    with pytest.raises(RuntimeError, match="listener failed"):
        asyncio.run(create(controller, "t", 3))  # type: ignore[arg-type]
    assert made[0].opened == made[0].count and not made[0].rolled_back
    assert list(controller.image.topics.by_name) == ["t"]


def test_a_new_node_is_formatted_at_transactions_v2_unless_told_and_keeps_its_level(
    tmp_path: Path,
) -> None:
    """``pydmq.bootstrap.transaction.version`` is 2 by default, as Kafka 4.x formats; 1 stays
    selectable; the level is written once, so a node formatted at 1 keeps it at its next
    start whatever the default says (pydmq has no UpdateFeatures)."""

    def formatted(directory: Path, config: BrokerConfig) -> dict[str, int]:
        metadata_log = LocalMetadataLog(directory, snapshot_interval_records=1000)
        controller = LocalController(
            metadata_log, config, PluginHost(load_entry_points=False), None
        )
        controller.bootstrap_features()
        features = dict(controller.image.features)
        metadata_log.close()
        return features

    assert formatted(tmp_path / "new", BrokerConfig())["transaction.version"] == 2
    v1 = BrokerConfig({"pydmq.bootstrap.transaction.version": 1})
    assert formatted(tmp_path / "v1", v1)["transaction.version"] == 1
    assert formatted(tmp_path / "v1", BrokerConfig())["transaction.version"] == 1
