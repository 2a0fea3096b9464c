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
topic), all of them with one metadata log entry, as an asynchronous answer that opens them in
chunks like CreateTopics; the names beyond are answered as being created, and the client's
retry creates the next ones. A request naming 1,000 new topics thus never holds the event loop
for long (each used to save the whole registry: 9-65 s per request). A name another request is
creating right now is also answered as being created; a refusal (the node's partition limit:
POLICY_VIOLATION...) is returned.

One body serves both modes; what differs is where the answers come from. Cluster mode
answers from the metadata cache: the alive (unfenced) brokers with their endpoint
on the listener the request came in on, leaders, epochs, replicas, ISR and offline replicas
(a partition whose leader is not alive: LEADER_NOT_AVAILABLE, leader -1). ``controller_id``
is a broker (clients send admin requests there, and brokers forward them): the active
controller when it is also an alive broker, else the lowest alive broker. Auto-creation asks
the controller (CreateTopics with the broker defaults; ``__consumer_offsets`` with the offsets
topic settings) and answers as being created until the topic arrives by UpdateMetadata, or
the controller's error (INVALID_REPLICATION_FACTOR with too few brokers...).

"All topics" is answered from ``BrokerServices.metadata_answers`` (issue 21): encoded once
per metadata version (``MetadataView.image_version``), listener, request version and
authorized-operations flag, and reused as a ``RawResponse`` until the metadata changes;
built afresh when the answer depends on the client (an authorizer, a request quota).

Authorization (with an authorizer, as Kafka's KafkaApis): a principal sees only the topics it
may DESCRIBE; "all topics" leaves the others out, a named one (or one asked by id) is
answered TOPIC_AUTHORIZATION_FAILED (no topic id when asked by name, so its existence is not
disclosed); a topic that would be auto-created needs CREATE on the cluster or on the topic,
else TOPIC_AUTHORIZATION_FAILED. As Kafka, the refused topics come after the others: those
refused creation, then those refused description. v8+ asking for
``topic_authorized_operations`` gets the TOPIC operations the principal may do (all of them
without an authorizer).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec, RawResponse
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import (
    IN_PROCESS,
    authorized_items,
    authorized_names,
    authorized_operations,
    authorized_to_create_topic,
)
from pydmq.broker.metadata_answers import AnswerKey
from pydmq.broker.services import BrokerServices
from pydmq.broker.topic_creator import NewTopic
from pydmq.broker.topics import TopicInfo
from pydmq.groups.log import OFFSETS_TOPIC
from pydmq.protocol.acl import TOPIC_OPERATIONS, AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.metadata import (
    MetadataRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
    encode_response,
)
from pydmq.protocol.primitives import Writer
from pydmq.protocol.topic_names import INTERNAL_TOPICS, topic_name_problem
from pydmq.storage.api import TopicPartition

__all__ = ["HANDLER"]

METADATA = 3
_ZERO_UUID = uuid.UUID(int=0)
_AUTHORIZED_OPS_NOT_REQUESTED = -(2**31)
# Kafka 4.4's answer for a topic whose auto-creation is under way (observed at v0-v13).
_BEING_CREATED = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_DESCRIBE = AclOperation.DESCRIBE
_TOPIC = ResourceType.TOPIC


def _brokers(ctx: BrokerContext) -> list[MetadataResponseBroker]:
    """The alive brokers with their endpoint on the request's listener (a single node: itself)."""
    return [
        MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.broker.metadata.alive_brokers(ctx.listener)
    ]


def _topic_metadata(broker: BrokerServices, topic: TopicInfo) -> MetadataResponseTopic:
    """A topic's answer, with its offline replicas, and LEADER_NOT_AVAILABLE for a partition
    whose leader is not alive."""
    metadata = broker.metadata
    partitions: list[MetadataResponsePartition] = []
    for p in topic.partitions:
        answer = MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=p.index,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=list(metadata.offline_replicas(TopicPartition(topic.name, p.index))),
        )
        if not metadata.is_alive(p.leader):
            answer.leader_id = -1
            answer.error_code = ErrorCode.LEADER_NOT_AVAILABLE
        partitions.append(answer)
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        topic_authorized_operations=_AUTHORIZED_OPS_NOT_REQUESTED,
        partitions=partitions,
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


def handle(
    ctx: BrokerContext, request: MetadataRequest
) -> MetadataResponse | RawResponse | Awaitable[MetadataResponse]:
    broker = ctx.broker
    version = ctx.api_version
    response = MetadataResponse(
        brokers=_brokers(ctx),
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id(),
    )
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if all_topics:
        return _all_topics(ctx, request, response)
    assert request.topics is not None
    allow_auto = (version < 4 or request.allow_auto_topic_creation) and broker.config.get_bool(
        "auto.create.topics.enable"
    )
    described = authorized_names(ctx, _DESCRIBE, _TOPIC, _requested_names(broker, request))
    seen: set[str] = set()
    answers: list[MetadataResponseTopic | str] = []  # a name: auto-created below
    not_creatable: list[MetadataResponseTopic] = []
    not_described: list[MetadataResponseTopic] = []
    for wanted in request.topics:
        if wanted.name is None:
            topic_id = wanted.topic_id
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            if topic is None:
                answers.append(_error_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID))
            elif topic.name not in described:
                not_described.append(_error_topic(None, topic_id, _DENIED))
            else:
                answers.append(_topic_metadata(broker, topic))
            continue
        name = wanted.name
        if name in seen:
            continue
        seen.add(name)
        topic = broker.topics.get(name)
        if name not in described:
            not_described.append(_error_topic(name, None, _DENIED))
        elif topic is not None:
            answers.append(_topic_metadata(broker, topic))
        elif allow_auto and not authorized_to_create_topic(ctx, name):
            not_creatable.append(_error_topic(name, None, _DENIED, name in INTERNAL_TOPICS))
        elif topic_name_problem(name):
            answers.append(_error_topic(name, None, ErrorCode.INVALID_TOPIC_EXCEPTION))
        elif not allow_auto:
            answers.append(_error_topic(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        elif name in INTERNAL_TOPICS and name != OFFSETS_TOPIC:  # created by their owners
            answers.append(_error_topic(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True))
        else:
            answers.append(name)
    if version >= 8 and request.include_topic_authorized_operations:
        for entry in answers:
            if not isinstance(entry, str) and entry.name is not None:
                entry.topic_authorized_operations = authorized_operations(
                    ctx, _TOPIC, entry.name, TOPIC_OPERATIONS
                )
    refused = not_creatable + not_described
    names = [a for a in answers if isinstance(a, str)]
    if not names:
        response.topics = [a for a in answers if not isinstance(a, str)] + refused
        return response
    return _answer_after_creating(broker, response, answers, names, refused)


def _all_topics(
    ctx: BrokerContext, request: MetadataRequest, response: MetadataResponse
) -> MetadataResponse | RawResponse:
    """Every topic the principal may describe; encoded once per metadata version and
    listener when the answer is the same for every client (no authorizer, no request
    quota: ``metadata_answers.py``)."""
    broker = ctx.broker
    version = ctx.api_version
    with_operations = version >= 8 and request.include_topic_authorized_operations
    shared = (
        broker.authorizer is None or ctx.listener == IN_PROCESS
    ) and not broker.quotas.request.enabled
    key = AnswerKey(METADATA, ctx.listener, version, with_operations)
    image_version = broker.metadata.image_version()
    if shared:
        cached = broker.metadata_answers.get(image_version, key)
        if cached is not None:
            return cached
    visible = authorized_items(ctx, _DESCRIBE, _TOPIC, list(broker.topics), _name)
    response.topics = [_topic_metadata(broker, t) for t in visible]
    if with_operations:
        for answer in response.topics:
            assert answer.name is not None
            answer.topic_authorized_operations = authorized_operations(
                ctx, _TOPIC, answer.name, TOPIC_OPERATIONS
            )
    if not shared:
        return response
    writer = Writer()
    encode_response(writer, response, version)
    body = writer.getvalue()
    encoded = RawResponse((body,), len(body))
    broker.metadata_answers.put(image_version, key, encoded)
    return encoded


def _name(topic: TopicInfo) -> str:
    return topic.name


def _requested_names(broker: BrokerServices, request: MetadataRequest) -> list[str]:
    """The topic names a request asks for, by name or by a known id."""
    names: list[str] = []
    for wanted in request.topics or ():
        if wanted.name is not None:
            names.append(wanted.name)
        elif wanted.topic_id is not None:
            topic = broker.topics.by_id(wanted.topic_id)
            if topic is not None:
                names.append(topic.name)
    return names


async def _answer_after_creating(
    broker: BrokerServices,
    response: MetadataResponse,
    answers: list[MetadataResponseTopic | str],
    names: list[str],
    refused: list[MetadataResponseTopic],
) -> MetadataResponse:
    codes = await _auto_create(broker, names)
    response.topics = [
        _error_topic(a, None, codes[a], a in INTERNAL_TOPICS) if isinstance(a, str) else a
        for a in answers
    ] + refused
    return response


def _affordable(broker: BrokerServices) -> int:
    """Topics one request may auto-create: its partition budget, at least one topic (or none
    ever is)."""
    budget = broker.config.get_int("pydmq.auto.create.max.partitions")
    return max(1, budget // broker.config.get_int("num.partitions"))


async def _auto_create(broker: BrokerServices, names: list[str]) -> dict[str, int]:
    """Ask the controller for ``names`` (one CreateTopics, within the request's partition
    budget; ``__consumer_offsets`` with the offsets topic settings, by its owner on a single
    node); the code to answer for each: ``_BEING_CREATED`` while it is being created (or
    created now, or by another request now: TOPIC_ALREADY_EXISTS; or no controller answered
    in time), else the controller's refusal."""
    creator = broker.topic_creator
    codes: dict[str, int] = {}
    if OFFSETS_TOPIC in names:
        codes[OFFSETS_TOPIC] = await creator.ensure_offsets_topic()
        names = [n for n in names if n != OFFSETS_TOPIC]
    affordable = _affordable(broker)
    codes.update(await creator.create_topics([NewTopic(n) for n in names[:affordable]]))
    codes.update((name, _BEING_CREATED) for name in names[affordable:])
    # Being created: asked (NONE), created meanwhile, no controller answered in time, or (a
    # single node's __consumer_offsets) its controller busy: the next request asks again.
    pending = (
        ErrorCode.NONE,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    )
    return {name: _BEING_CREATED if code in pending else code for name, code in codes.items()}


HANDLER = ApiHandlerSpec(METADATA, 0, 13, handle, "Metadata")
