"""Metadata (key 3), v0-v13.

Topics null (v1+) or empty (v0) means all topics. Auto-creation happens when the request allows
it (v4+ flag; always for v0-v3), ``auto.create.topics.enable`` is true and the name is legal;
an illegal name gets INVALID_TOPIC_EXCEPTION, an unknown topic UNKNOWN_TOPIC_OR_PARTITION.
Topic ids from v10 (lookup by id from v12: UNKNOWN_TOPIC_ID). Leader epochs from v7.
"""

from __future__ import annotations

import uuid

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.broker.server import Broker
from pydmq.broker.topic_names import INTERNAL_TOPICS, topic_name_problem
from pydmq.broker.topic_ops import TopicError
from pydmq.broker.topics import TopicInfo
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

__all__ = ["HANDLER", "broker_list"]

_ZERO_UUID = uuid.UUID(int=0)
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)


def broker_list(ctx: RequestContext) -> list[MetadataResponseBroker]:
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


def _error_topic(name: str | None, topic_id: uuid.UUID | None, code: int) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=code,
        name=name,
        topic_id=topic_id or _ZERO_UUID,
        is_internal=False,
        topic_authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
        partitions=[],
    )


def _create_internal(broker: Broker, name: str) -> TopicInfo:
    """Internal topics are created by their owner with their own settings, never as a default
    topic (Kafka: __consumer_offsets gets offsets.topic.num.partitions and compaction)."""
    if name == OFFSETS_TOPIC:
        broker.group_coordinator_log.ensure_created()
        topic = broker.topics.get(name)
        if topic is not None:
            return topic
    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name} is created by its owner")


def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
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
    for wanted in request.topics:
        if wanted.name is None:
            topic_id = wanted.topic_id
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            if topic is None:
                response.topics.append(_error_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            else:
                response.topics.append(topic_metadata(broker, topic))
            continue
        name = wanted.name
        if name in seen:
            continue
        seen.add(name)
        topic = broker.topics.get(name)
        if topic is None:
            if topic_name_problem(name):
                response.topics.append(_error_topic(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if not allow_auto:
                response.topics.append(
                    _error_topic(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            try:
                if name in INTERNAL_TOPICS:
                    topic = _create_internal(broker, name)
                else:
                    topic = broker.topic_ops.create_topic(name)
            except TopicError as exc:
                response.topics.append(_error_topic(name, None, exc.error_code))
                continue
        response.topics.append(topic_metadata(broker, topic))
    return response


HANDLER = ApiHandlerSpec(3, 0, 13, handle, "Metadata")
