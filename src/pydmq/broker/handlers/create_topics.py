"""CreateTopics (key 19), v2-v7.

Validation as Kafka: legal names, no '.'/'_' collisions, partitions and replication factor
(-1 = broker default; more replicas than live brokers -> INVALID_REPLICATION_FACTOR), manual
assignments, known and valid configs (INVALID_CONFIG). ``validate_only`` checks without
creating. From v5 the result carries the partition count, replication factor and every config
with its value and source; topic ids from v7. Duplicate names in one request -> INVALID_REQUEST
for each duplicate. A client may not create an internal or reserved topic
(``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata``,
``__share_group_state``): INVALID_REQUEST "Creation of internal topic X is prohibited." (Kafka
says so for ``__cluster_metadata`` only; see :func:`internal_topic_creation_problem`). The broker
creates its internal topics itself, through its topic operations, not through this handler.
More than 10,000 new partitions in one request, or more than
``pydmq.max.broker.partitions`` hosted by this node -> POLICY_VIOLATION with the limit in the
message. All or nothing: a storage error opening any new partition's log -> KAFKA_STORAGE_ERROR
for every topic of the request, none of them created. The partitions are opened in chunks
between which other connections are served (``TopicOperations.create_topics``).

In cluster mode the request is forwarded to the active controller at the same version and its
response returned (REQUEST_TIMED_OUT per item when no controller answers).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.topic_ops import NewTopic
from pydmq.config.sources import CONFIG_SOURCES
from pydmq.config.topic import TopicConfig
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.protocol.topic_names import internal_topic_creation_problem

__all__ = ["HANDLER"]


def _refused(topic: CreatableTopic, version: int, code: int, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=topic.name,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None if version >= 5 else [],
    )


async def _handle_local(ctx: BrokerContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    response = CreateTopicsResponse()
    counts = collections.Counter(t.name for t in request.topics)
    wanted: list[NewTopic] = []
    for topic in request.topics:
        if counts[topic.name] == 1 and (problem := internal_topic_creation_problem(topic.name)):
            response.topics.append(
                _refused(topic, ctx.api_version, ErrorCode.INVALID_REQUEST, problem)
            )
            continue
        result = CreatableTopicResult(
            name=topic.name,
            error_code=ErrorCode.NONE,
            num_partitions=-1,
            replication_factor=-1,
        )
        response.topics.append(result)
        if counts[topic.name] > 1:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Duplicate topic name {topic.name} in the request."
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
        configs = {c.name: c.value for c in topic.configs}
        wanted.append(
            NewTopic(
                topic.name, topic.num_partitions, topic.replication_factor, configs, assignments
            )
        )
    outcomes = await broker.topic_ops.create_topics(wanted, request.validate_only)
    by_name = {new.name: outcome for new, outcome in zip(wanted, outcomes, strict=True)}
    for result in response.topics:
        created = by_name.get(result.name)
        if created is None:
            continue  # a duplicate name
        if isinstance(created, TopicError):
            result.error_code = created.error_code
            result.error_message = created.message
            if ctx.api_version >= 5:
                result.configs = None
            continue
        result.topic_id = created.topic_id
        result.num_partitions = len(created.partitions)
        result.replication_factor = len(created.partitions[0].replicas)
        if ctx.api_version >= 5:
            effective = TopicConfig(broker.config, created.configs)
            result.configs = []
            for definition in TopicConfig.definitions():
                result.configs.append(
                    CreatableTopicConfigs(
                        name=definition.name,
                        value=definition.render(effective.get(definition.name)),
                        read_only=definition.read_only,
                        config_source=CONFIG_SOURCES[effective.source_of(definition.name)],
                        is_sensitive=definition.sensitive,
                    )
                )
    return response


def handle(
    ctx: BrokerContext, request: CreateTopicsRequest
) -> CreateTopicsResponse | Awaitable[CreateTopicsResponse]:
    cluster = ctx.broker.cluster
    if cluster is None:
        return _handle_local(ctx, request)

    reserved = {
        t.name: problem
        for t in request.topics
        if (problem := internal_topic_creation_problem(t.name)) is not None
    }
    if not reserved:
        return _forward(ctx, request)
    return _forward_allowed(ctx, request, reserved)


def _forward(ctx: BrokerContext, request: CreateTopicsRequest) -> Awaitable[CreateTopicsResponse]:
    cluster = ctx.broker.cluster
    assert cluster is not None

    def unavailable(code: int, message: str) -> CreateTopicsResponse:
        return CreateTopicsResponse(
            topics=[_refused(t, ctx.api_version, code, message) for t in request.topics]
        )

    return forward_to_controller(ctx, cluster, request, unavailable, request.timeout)


async def _forward_allowed(
    ctx: BrokerContext, request: CreateTopicsRequest, reserved: dict[str, str]
) -> CreateTopicsResponse:
    """Refuse the reserved names here and forward the rest; answers keep the request's order."""
    allowed = [t for t in request.topics if t.name not in reserved]
    answered: dict[str, CreatableTopicResult] = {}
    response = CreateTopicsResponse()
    if allowed:
        forwarded = CreateTopicsRequest(
            topics=allowed, timeout=request.timeout, validate_only=request.validate_only
        )
        response = await _forward(ctx, forwarded)
        answered = {r.name: r for r in response.topics}
    response.topics = [
        _refused(t, ctx.api_version, ErrorCode.INVALID_REQUEST, reserved[t.name])
        if t.name in reserved
        else answered[t.name]
        for t in request.topics
    ]
    return response


HANDLER = ApiHandlerSpec(19, 2, 7, handle, "CreateTopics")
