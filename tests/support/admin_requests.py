"""Admin requests sent to a Broker's own handlers in process (no connection), for the tests
of a single node's admin path: each returns the handler's per-item answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydmq.api.handler import RequestContext
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_topics,
)
from pydmq.broker.server import Broker
from pydmq.protocol.messages.alter_configs import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
)
from pydmq.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
)
from pydmq.protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicState,
)


def context(broker: Broker, api_key: int, version: int) -> BrokerContext:
    return RequestContext(
        broker.services, api_key, version, 1, "test", "127.0.0.1", 1, "PLAINTEXT", 1
    )


async def _call(broker: Broker, api_key: int, version: int, handle: Any, request: Any) -> Any:
    answer = handle(context(broker, api_key, version), request)
    return await answer if hasattr(answer, "__await__") else answer


async def create(
    broker: Broker, topics: Mapping[str, int], validate_only: bool = False
) -> list[CreatableTopicResult]:
    """CreateTopics v7 of ``topics`` (name -> partitions), replication factor 1."""
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=name, num_partitions=count, replication_factor=1)
            for name, count in topics.items()
        ],
        timeout=30000,
        validate_only=validate_only,
    )
    response = await _call(broker, 19, 7, create_topics.handle, request)
    return list(response.topics)


async def grow(broker: Broker, counts: Mapping[str, int]) -> list[CreatePartitionsTopicResult]:
    """CreatePartitions v3: each topic to its new total count."""
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsTopic(name=name, count=count, assignments=None)
            for name, count in counts.items()
        ],
        timeout=30000,
        validate_only=False,
    )
    response = await _call(broker, 37, 3, create_partitions.handle, request)
    return list(response.results)


async def delete(broker: Broker, names: Sequence[str]) -> list[DeletableTopicResult]:
    """DeleteTopics v6 by name."""
    request = DeleteTopicsRequest(
        topics=[DeleteTopicState(name=name) for name in names], timeout=30000
    )
    response = await _call(broker, 20, 6, delete_topics.handle, request)
    return list(response.responses)


async def alter_topic_configs(
    broker: Broker, name: str, configs: Mapping[str, str]
) -> AlterConfigsResourceResponse:
    """AlterConfigs v2 of one topic: its complete new set of explicit configs."""
    request = AlterConfigsRequest(
        resources=[
            AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
        ],
        validate_only=False,
    )
    response = await _call(broker, 33, 2, alter_configs.handle, request)
    [result] = response.responses
    assert isinstance(result, AlterConfigsResourceResponse)
    return result
