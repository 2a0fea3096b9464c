"""Metadata (key 3), v0-v13.

Topics null (v1+) or empty (v0) means all topics. Auto-creation happens when the request allows
it (v4+ flag; always for v0-v3), ``auto.create.topics.enable`` is true and the name is legal;
an illegal name gets INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
Topic ids from v10 (lookup by id from v12: UNKNOWN_TOPIC_ID). Leader epochs from v7.

A topic this request creates is answered as Kafka 4.4 answers it, at every version:
UNKNOWN_TOPIC_OR_PARTITION, no partitions, topic id zero (``_BEING_CREATED``); the client's
next Metadata request finds it. (Kafka creates it asynchronously through its controller and
answers that code while the creation is under way; a pydmq single node has created it when it
answers, but answers the same, so that a client never reads the partitions of a topic in the
answer of the request that created it, e.g. re-created after DeleteTopics.)
``__consumer_offsets`` is created by its owner with its own settings, and answered the same
way (``is_internal`` true).

One request auto-creates at most ``pydmq.auto.create.max.partitions`` partitions (at least one
topic), all of them with one registry save, as an asynchronous answer that opens them in
chunks like CreateTopics; the names beyond are answered as being created, and the client's
retry creates the next ones. A request naming 1,000 new topics thus never holds the event loop
for long (each used to save the whole registry: 9-65 s per request). A name another request is
creating right now is also answered as being created; a refusal (the node's partition limit:
POLICY_VIOLATION...) is returned.

Cluster mode answers from the metadata cache: the alive (unfenced) brokers with their endpoint
on the listener the request came in on, leaders, epochs, replicas, ISR and offline replicas
(a partition whose leader is not alive: LEADER_NOT_AVAILABLE, leader -1). ``controller_id``
is a broker (clients send admin requests there, and brokers forward them): the active
controller when it is also an alive broker, else the lowest alive broker. Auto-creation asks
the controller (CreateTopics with the broker defaults; ``__consumer_offsets`` with the offsets
topic settings) and answers as being created until the topic arrives by UpdateMetadata, or
the controller's error (INVALID_REPLICATION_FACTOR with too few brokers...).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.server import Broker
from pydmq.broker.topic_ops import NewTopic
from pydmq.broker.topics import TopicInfo
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode, TopicError
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from pydmq.protocol.topic_names import INTERNAL_TOPICS, topic_name_problem
from pydmq.storage.api import TopicPartition

if TYPE_CHECKING:  # cluster mode only: not imported by a single node (start-up time)
    from pydmq.broker.cluster.runtime import BrokerCluster

__all__ = ["HANDLER", "broker_list"]

_ZERO_UUID = uuid.UUID(int=0)
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# Kafka 4.4's answer for a topic whose auto-creation is under way (observed at v0-v13).
_BEING_CREATED = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def broker_list(ctx: BrokerContext) -> list[MetadataResponseBroker]:
    host, port = ctx.broker.advertised_endpoint(ctx.listener)
    rack = ctx.broker.config.get("broker.rack")
    return [
        MetadataResponseBroker(
            node_id=ctx.broker.node_id,
            host=host,
            port=port,
            rack=None if rack is None else str(rack),
        )
    ]


def topic_metadata(broker: Broker, topic: TopicInfo) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        topic_authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=p.index,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[],
            )
            for p in topic.partitions
        ],
    )


def _error_topic(
    name: str | None, topic_id: uuid.UUID | None, code: int, internal: bool = False
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id or _ZERO_UUID,
        is_internal=internal,
        topic_authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
        partitions=[],
    )


def _create_internal(broker: Broker, name: str) -> None:
    """Internal topics are created by their owner with their own settings, never as a default
    topic (Kafka: __consumer_offsets gets offsets.topic.num.partitions and compaction)."""
    if name == OFFSETS_TOPIC:
        broker.group_coordinator_log.ensure_created()
        if broker.topics.get(name) is not None:
            return
    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name} is created by its owner")


def _cluster_brokers(cluster: BrokerCluster, listener: str) -> list[MetadataResponseBroker]:
    out: list[MetadataResponseBroker] = []
    for broker_id in cluster.metadata_cache.alive_broker_ids():
        cached = cluster.metadata_cache.brokers[broker_id]
        endpoint = cached.endpoint(listener)
        if endpoint is None:
            continue
        out.append(
            MetadataResponseBroker(
                node_id=broker_id, host=endpoint[0], port=endpoint[1], rack=cached.rack
            )
        )
    return out


def _cluster_controller_id(cluster: BrokerCluster) -> int:
    cache = cluster.metadata_cache
    if cache.is_alive(cache.controller_id):
        return cache.controller_id
    alive = cache.alive_broker_ids()
    return alive[0] if alive else -1


def _cluster_topic_metadata(cluster: BrokerCluster, topic: TopicInfo) -> MetadataResponseTopic:
    cache = cluster.metadata_cache
    result = topic_metadata(cluster.broker, topic)
    for p in result.partitions:
        tp = TopicPartition(topic.name, p.partition_index)
        p.offline_replicas = list(cache.offline(tp))
        if not cache.is_alive(p.leader_id):
            p.leader_id = -1
            p.error_code = ErrorCode.LEADER_NOT_AVAILABLE
    return result


async def _handle_cluster(
    ctx: BrokerContext, request: MetadataRequest, cluster: BrokerCluster
) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    response = MetadataResponse(
        brokers=_cluster_brokers(cluster, ctx.listener),
        cluster_id=broker.cluster_id,
        controller_id=_cluster_controller_id(cluster),
    )
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if all_topics:
        response.topics = [_cluster_topic_metadata(cluster, t) for t in broker.topics]
        return response
    assert request.topics is not None
    allow_auto = (version < 4 or request.allow_auto_topic_creation) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    seen: set[str] = set()
    answers: list[MetadataResponseTopic | str] = []  # a name: asked of the controller below
    for wanted in request.topics:
        if wanted.name is None:
            topic_id = wanted.topic_id
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            if topic is None:
                answers.append(_error_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                answers.append(_cluster_topic_metadata(cluster, topic))
            continue
        name = wanted.name
        if name in seen:
            continue
        seen.add(name)
        topic = broker.topics.get(name)
        if topic is not None:
            answers.append(_cluster_topic_metadata(cluster, topic))
        elif topic_name_problem(name):
            answers.append(_error_topic(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
        elif not allow_auto or (name in INTERNAL_TOPICS and name != OFFSETS_TOPIC):
            answers.append(_error_topic(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            answers.append(name)
    codes = await _cluster_auto_create(broker, [a for a in answers if isinstance(a, str)])
    response.topics = [
        _error_topic(a, None, codes[a], a in INTERNAL_TOPICS) if isinstance(a, str) else a
        for a in answers
    ]
    return response


async def _cluster_auto_create(broker: Broker, names: list[str]) -> dict[str, int]:
    """Ask the controller for ``names`` (one CreateTopics, within the request's partition
    budget); the code to answer for each: ``_BEING_CREATED`` while it is being created."""
    if not names:
        return {}
    from pydmq.broker.cluster.topic_ops import ClusterTopicOperations

    ops = broker.topic_ops
    assert isinstance(ops, ClusterTopicOperations)
    codes: dict[str, int] = {}
    if OFFSETS_TOPIC in names:
        codes[OFFSETS_TOPIC] = await ops.ensure_offsets_topic()
        names = [n for n in names if n != OFFSETS_TOPIC]
    budget = broker.config.get_int("pydmq.auto.create.max.partitions")
    affordable = max(1, budget // broker.config.get_int("num.partitions"))
    codes.update(await ops.create_topics_via_controller([NewTopic(n) for n in names[:affordable]]))
    codes.update((name, _BEING_CREATED) for name in names[affordable:])
    pending = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT)
    return {name: _BEING_CREATED if code in pending else code for name, code in codes.items()}


def handle(
    ctx: BrokerContext, request: MetadataRequest
) -> MetadataResponse | Awaitable[MetadataResponse]:
    cluster = ctx.broker.cluster
    if cluster is not None:
        return _handle_cluster(ctx, request, cluster)
    broker = ctx.broker
    version = ctx.api_version
    response = MetadataResponse(
        brokers=broker_list(ctx),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
    )
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if all_topics:
        response.topics = [topic_metadata(broker, t) for t in broker.topics]
        return response
    assert request.topics is not None
    allow_auto = (version < 4 or request.allow_auto_topic_creation) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    seen: set[str] = set()
    answers: list[MetadataResponseTopic | str] = []  # a name: auto-created below
    for wanted in request.topics:
        if wanted.name is None:
            topic_id = wanted.topic_id
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            if topic is None:
                answers.append(_error_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                answers.append(topic_metadata(broker, topic))
            continue
        name = wanted.name
        if name in seen:
            continue
        seen.add(name)
        topic = broker.topics.get(name)
        if topic is not None:
            answers.append(topic_metadata(broker, topic))
        elif topic_name_problem(name):
            answers.append(_error_topic(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
        elif not allow_auto:
            answers.append(_error_topic(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif name in INTERNAL_TOPICS:
            try:
                _create_internal(broker, name)
                answers.append(_error_topic(name, None, _BEING_CREATED, internal=True))
            except TopicError as exc:
                answers.append(_error_topic(name, None, exc.error_code, internal=True))
        else:
            answers.append(name)
    names = [a for a in answers if isinstance(a, str)]
    if not names:
        response.topics = [a for a in answers if not isinstance(a, str)]
        return response
    return _answer_after_creating(broker, response, answers, names)


async def _answer_after_creating(
    broker: Broker,
    response: MetadataResponse,
    answers: list[MetadataResponseTopic | str],
    names: list[str],
) -> MetadataResponse:
    created = await _auto_create(broker, names)
    response.topics = [created[a] if isinstance(a, str) else a for a in answers]
    return response


async def _auto_create(broker: Broker, names: list[str]) -> dict[str, MetadataResponseTopic]:
    """Create default topics for ``names`` within the request's partition budget (opened in
    chunks, as CreateTopics); the answer for each name."""
    budget = broker.config.get_int("pydmq.auto.create.max.partitions")
    each = broker.config.get_int("num.partitions")
    affordable = max(1, budget // each)  # at least one topic per request, or none ever is
    outcomes = await broker.topic_ops.create_topics([NewTopic(n) for n in names[:affordable]])
    answers: dict[str, MetadataResponseTopic] = {}
    for name, outcome in zip(names, outcomes, strict=False):
        # Created now, or by another request now (TOPIC_ALREADY_EXISTS): being created.
        if isinstance(outcome, TopicInfo) or outcome.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            answers[name] = _error_topic(name, None, _BEING_CREATED)
        else:
            answers[name] = _error_topic(name, None, outcome.error_code)
    for name in names[affordable:]:
        answers[name] = _error_topic(name, None, _BEING_CREATED)
    return answers


HANDLER = ApiHandlerSpec(3, 0, 13, handle, "Metadata")
