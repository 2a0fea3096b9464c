"""The controller's admin handlers over the AdminController port: one set of handlers for a
cluster's active controller and a single node's own, and the controller's error, with its
message, answered for every item when it cannot run or store an operation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from pydmq.api.handler import RequestContext
from pydmq.config.broker import BrokerConfig
from pydmq.controller.errors import ControllerError, NotControllerError
from pydmq.controller.handlers.admin import admin_handler_specs
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from pydmq.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from pydmq.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicState
from pydmq.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
)

pytestmark = pytest.mark.timeout(30)

# 32: DescribeConfigs of the REST admin API's answers only (controller/handlers/rest_answers.py)
ADMIN_KEYS = [19, 20, 30, 31, 32, 33, 37, 43, 44, 45, 46, 49, 51]


class Refusing:
    """An AdminController whose every operation fails with ``error``."""

    def __init__(self, error: ControllerError) -> None:
        self.config = BrokerConfig()
        self.error = error
        self.ran = 0

    @property
    def operation_context(self) -> Any:
        raise AssertionError("not needed: the operation never runs")

    async def run(self, operation: Callable[..., Any]) -> Any:
        self.ran += 1
        raise self.error


def call(controller: Refusing, api_key: int, version: int, request: Any) -> Any:
    spec = admin_handler_specs(controller)[api_key]
    ctx: RequestContext[object] = RequestContext(
        object(), api_key, version, 1, "test", "127.0.0.1", 1, "CONTROLLER", 1
    )
    return asyncio.run(spec.handle(ctx, request))


def test_the_admin_handlers_are_the_controller_listeners_admin_keys() -> None:
    assert sorted(admin_handler_specs(Refusing(NotControllerError("x")))) == ADMIN_KEYS


def test_a_storage_error_is_answered_with_the_controllers_message_for_every_item() -> None:
    controller = Refusing(ControllerError(ErrorCode.KAFKA_STORAGE_ERROR, "Storage error: full."))
    created = call(
        controller,
        19,
        7,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=n, num_partitions=1, replication_factor=1) for n in "ab"],
            timeout=1000,
            validate_only=False,
        ),
    )
    assert [(t.name, t.error_code, t.error_message, t.configs) for t in created.topics] == [
        (n, ErrorCode.KAFKA_STORAGE_ERROR, "Storage error: full.", None) for n in "ab"
    ]
    deleted = call(
        controller, 20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="a")], timeout=1)
    )
    assert [(r.error_code, r.error_message) for r in deleted.responses] == [
        (ErrorCode.KAFKA_STORAGE_ERROR, "Storage error: full.")
    ]
    grown = call(
        controller,
        37,
        3,
        CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name="a", count=2, assignments=None)],
            timeout=1,
            validate_only=False,
        ),
    )
    assert [(r.error_code, r.error_message) for r in grown.results] == [
        (ErrorCode.KAFKA_STORAGE_ERROR, "Storage error: full.")
    ]
    altered = call(
        controller,
        33,
        2,
        AlterConfigsRequest(
            resources=[
                AlterConfigsResource(
                    resource_type=2,
                    resource_name="a",
                    configs=[AlterableConfig(name="retention.ms", value="1")],
                )
            ],
            validate_only=False,
        ),
    )
    assert [(r.error_code, r.error_message) for r in altered.responses] == [
        (ErrorCode.KAFKA_STORAGE_ERROR, "Storage error: full.")
    ]
    assert controller.ran == 4


def test_not_controller_keeps_kafkas_text_and_listing_runs_as_an_operation() -> None:
    controller = Refusing(NotControllerError("node 1 is not the active controller"))
    listed = call(controller, 46, 0, ListPartitionReassignmentsRequest(timeout=1, topics=None))
    assert (listed.error_code, listed.error_message) == (
        ErrorCode.NOT_CONTROLLER,
        "This is not the correct controller for this cluster.",
    )
    assert controller.ran == 1
