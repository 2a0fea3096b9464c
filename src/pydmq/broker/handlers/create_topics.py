"""CreateTopics (key 19), v2-v7.

Validation as Kafka: legal names, no '.'/'_' collisions, partitions and replication factor
(-1 = broker default; more replicas than live brokers -> INVALID_REPLICATION_FACTOR), manual
assignments, known and valid configs (INVALID_CONFIG). ``validate_only`` checks without
creating. From v5 the result carries the partition count, replication factor and every config
with its value and source; topic ids from v7. Duplicate names in one request -> INVALID_REQUEST
for each duplicate ("Duplicate topic name."). A client may not create an internal or reserved topic
(``__consumer_offsets``, ``__transaction_state``, ``__cluster_metadata``,
``__share_group_state``): INVALID_REQUEST "Creation of internal topic X is prohibited." (Kafka
says so for ``__cluster_metadata`` only; see :func:`internal_topic_creation_problem`): that
check is the broker's, the rest is the controller's. The broker creates its internal topics
itself (:mod:`pydmq.broker.topic_creator`), not through this handler.
More than 10,000 new partitions in one request, or more than
``pydmq.max.broker.partitions`` hosted by this node -> POLICY_VIOLATION with the limit in the
message. All or nothing: a storage error opening any new partition's log -> KAFKA_STORAGE_ERROR
for every topic of the request, none of them created. A single node opens the partitions in
chunks between which other connections are served (:mod:`pydmq.broker.partition_creation`).

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT per item when none answers; a single node's own, in process).

Authorization (as Kafka): CREATE on the cluster or on the topic, else that topic is
TOPIC_AUTHORIZATION_FAILED ("Authorization failed.") and the others are forwarded.
A client with a ``controller_mutation_rate`` quota is held to it before the request is
forwarded (:mod:`pydmq.broker.handlers._mutation_quota`; strict from v6).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_to_create_topic
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.broker.handlers._mutation_quota import THROTTLED, finish, mutation_quota
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from pydmq.protocol.topic_names import internal_topic_creation_problem
from pydmq.quotas.controller_mutation import ControllerMutationQuota

__all__ = ["HANDLER"]

_DENIED_MESSAGE = "Authorization failed."


def _refused(
    topic: CreatableTopic, version: int, code: int, message: str | None
) -> CreatableTopicResult:
    return CreatableTopicResult(
        name=topic.name,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None if version >= 5 else [],
    )


def _partitions(ctx: BrokerContext, topic: CreatableTopic) -> int:
    """The partitions ``topic`` would create (what the mutation quota counts)."""
    if topic.num_partitions != -1:
        return int(topic.num_partitions)
    if topic.assignments:
        return len(topic.assignments)
    return ctx.broker.config.get_int("num.partitions")


def handle(ctx: BrokerContext, request: CreateTopicsRequest) -> Awaitable[CreateTopicsResponse]:
    counts = collections.Counter(t.name for t in request.topics)
    refused: dict[str, tuple[int, str | None]] = {
        t.name: (ErrorCode.INVALID_REQUEST, problem)
        for t in request.topics
        if counts[t.name] == 1 and (problem := internal_topic_creation_problem(t.name)) is not None
    }
    refused.update(
        (t.name, (ErrorCode.TOPIC_AUTHORIZATION_FAILED, _DENIED_MESSAGE))
        for t in request.topics
        if counts[t.name] == 1
        and t.name not in refused
        and not authorized_to_create_topic(ctx, t.name)
    )
    quota = mutation_quota(ctx, 6)
    if quota is not None:
        for t in request.topics:
            counted = counts[t.name] == 1 and t.name not in refused
            if counted and not quota.record(_partitions(ctx, t)):
                refused[t.name] = (ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED)
    if not refused and quota is None:
        return _forward(ctx, request)
    return _forward_allowed(ctx, request, refused, quota)


def _forward(ctx: BrokerContext, request: CreateTopicsRequest) -> Awaitable[CreateTopicsResponse]:
    def unavailable(code: int, message: str) -> CreateTopicsResponse:
        return CreateTopicsResponse(
            topics=[_refused(t, ctx.api_version, code, message) for t in request.topics]
        )

    return forward_to_controller(ctx, request, unavailable, request.timeout)


async def _forward_allowed(
    ctx: BrokerContext,
    request: CreateTopicsRequest,
    refused: dict[str, tuple[int, str | None]],
    quota: ControllerMutationQuota | None,
) -> CreateTopicsResponse:
    """Refuse the reserved and unauthorized names (and those over the mutation quota) here
    and forward the rest; answers keep the request's order."""
    allowed = [t for t in request.topics if t.name not in refused]
    answered: dict[str, CreatableTopicResult] = {}
    response = CreateTopicsResponse()
    if allowed:
        forwarded = CreateTopicsRequest(
            topics=allowed, timeout=request.timeout, validate_only=request.validate_only
        )
        response = await _forward(ctx, forwarded)
        answered = {r.name: r for r in response.topics}
    response.topics = [
        _refused(t, ctx.api_version, *refused[t.name]) if t.name in refused else answered[t.name]
        for t in request.topics
    ]
    finish(ctx, quota, response)
    return response


HANDLER = ApiHandlerSpec(19, 2, 7, handle, "CreateTopics")
