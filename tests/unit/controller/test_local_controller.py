"""LocalController: a single node runs the controller's operations on its local metadata log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from pydmq.config.broker import BrokerConfig
from pydmq.controller.local import LocalController
from pydmq.controller.local_log import LocalMetadataLog
from pydmq.controller.operations import CreatableTopic, create_topics, delete_topics
from pydmq.metadata.delta import MetadataDelta
from pydmq.metadata.image import MetadataImage
from pydmq.plugins.host import PluginHost
from pydmq.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(60)


def open_controller(directory: Path) -> LocalController:
    metadata_log = LocalMetadataLog(directory, snapshot_interval_records=1000)
    return LocalController(metadata_log, BrokerConfig(), PluginHost(load_entry_points=False))


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
    [created] = controller.run(
        lambda image: create_topics(image, context, [CreatableTopic("t", 2)])
    )
    assert created.error_code == ErrorCode.NONE
    [deleted] = controller.run(lambda image: delete_topics(image, context, ["t"]))
    assert deleted.error_code == ErrorCode.NONE
    assert seen == [({created.topic_id: "t"}, []), ({}, ["t"])]
    controller.metadata_log.close()
    assert not open_controller(tmp_path).image.topics.by_name  # replayed: created, deleted
