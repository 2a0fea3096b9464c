"""CreateTopics (key 19), v2-v7, forwarded by brokers to the active controller.

The same versions as the broker's own handler (brokers forward the client's request
unchanged, at the client's version). Validation and placement are the operation's
(:func:`~pydmq.controller.operations.create_topics`); this module maps the wire message to
it and back. From v5 a result lists every topic config with its value and source, computed
from this controller's broker config (all nodes of a cluster share the static defaults).
Not active: NOT_CONTROLLER for every topic, so the broker retries on the new controller.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.config.sources import CONFIG_SOURCES
from pydmq.config.topic import TopicConfig
from pydmq.controller.handlers._common import AdminController, run_operation
from pydmq.controller.operations import CreatableTopic, create_topics
from pydmq.protocol.messages.create_topics import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

__all__ = ["make_handler"]


def make_handler(controller: AdminController) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: CreateTopicsRequest
    ) -> CreateTopicsResponse:
        wanted = [
            CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=(
                    {a.partition_index: list(a.broker_ids) for a in t.assignments}
                    if t.assignments
                    else None
                ),
                configs={c.name: c.value for c in t.configs},
            )
            for t in request.topics
        ]
        results, error, message = await run_operation(
            controller,
            lambda image: create_topics(
                image,
                controller.operation_context,
                wanted,
                validate_only=request.validate_only,
            ),
        )
        response = CreateTopicsResponse()
        if results is None:
            for t in request.topics:
                result = CreatableTopicResult(
                    name=t.name,
                    error_code=error,
                    error_message=message,
                    num_partitions=-1,
                    replication_factor=-1,
                )
                if ctx.api_version >= 5:
                    result.configs = None
                response.topics.append(result)
            return response
        for created in results:
            result = CreatableTopicResult(
                name=created.name,
                error_code=created.error_code,
                error_message=created.error_message,
                num_partitions=created.num_partitions,
                replication_factor=created.replication_factor,
            )
            if created.topic_id is not None:
                result.topic_id = created.topic_id
            if ctx.api_version >= 5:
                result.configs = (
                    None if created.error_code else _configs(controller, created.configs)
                )
            response.topics.append(result)
        return response

    return ApiHandlerSpec(19, 2, 7, handle, "CreateTopics")


def _configs(
    controller: AdminController, explicit: Mapping[str, str]
) -> list[CreatableTopicConfigs]:
    effective = TopicConfig(controller.config, dict(explicit))
    return [
        CreatableTopicConfigs(
            name=d.name,
            value=d.render(effective.get(d.name)),
            read_only=d.read_only,
            config_source=CONFIG_SOURCES[effective.source_of(d.name)],
            is_sensitive=d.sensitive,
        )
        for d in TopicConfig.definitions()
    ]
