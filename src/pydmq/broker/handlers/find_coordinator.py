"""FindCoordinator (key 10), v0-v6.

Key type 0 (group), key type 1 (transaction, a transactional id) and key type 2 (share, a
share-partition as ``group:topicId:partition``, KIP-932: the leader of its
``__share_group_state`` partition; asked by brokers, CLUSTER_ACTION on the cluster). Single-node mode: every
group and transactional id is coordinated by this node, answered with the advertised host/port
of the listener the request came in on; ``__consumer_offsets`` or ``__transaction_state`` is
created (internal, compacted) on first use. Cluster mode: the coordinator is the leader of the
key's partition of that topic (``__consumer_offsets`` for a group, ``__transaction_state`` for
a transactional id: Kafka's Java hash code of the key modulo the partition count) as this
broker's metadata (UpdateMetadata) has it, answered with that broker's endpoint on the
listener the request came in on; while the topic does not exist its creation is asked of the
controller and the answer is COORDINATOR_NOT_AVAILABLE, as it is for a partition without a
leader or a leader without that listener. Any other key type: INVALID_REQUEST.
v0-v3 carry one key and answer in the top-level fields (error message from v1); v4+ batch
``coordinator_keys`` and answer in ``coordinators``.

Authorization (as Kafka): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) or on the
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), with no node.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized, authorized_cluster
from pydmq.groups.log import OFFSETS_TOPIC, is_cluster_mode, partition_for
from pydmq.protocol.acl import AclOperation, ResourceType
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.find_coordinator import (
    Coordinator,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from pydmq.shares.state_log import SHARE_GROUP_STATE_TOPIC
from pydmq.transactions.log import TRANSACTION_STATE_TOPIC

__all__ = ["HANDLER"]

log = logging.getLogger(__name__)

_GROUP = 0
_TRANSACTION = 1
_SHARE = 2
_DESCRIBE = AclOperation.DESCRIBE
_TXN_ID = ResourceType.TRANSACTIONAL_ID


def _not_available(key: str) -> Coordinator:
    return Coordinator(
        key=key,
        node_id=-1,
        host="",
        port=-1,
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
        error_message="The coordinator is not available.",
    )


def _coordinator_in_cluster(
    ctx: BrokerContext, key: str, topic_name: str, request_creation: Callable[[], object]
) -> Coordinator:
    broker = ctx.broker
    topic = broker.topics.get(topic_name)
    if topic is None or not topic.partitions:
        try:
            request_creation()
        except Exception:
            log.exception("asking for the creation of %s failed", topic_name)
        return _not_available(key)
    # the same partitioning for both topics: abs(Java hashCode of the key) % partitions
    index = partition_for(key, len(topic.partitions))
    leader = next((p.leader for p in topic.partitions if p.index == index), -1)
    if leader < 0:
        return _not_available(key)
    if leader == broker.node_id:
        host, port = broker.advertised_endpoint(ctx.listener)
        return Coordinator(key=key, node_id=leader, host=host, port=port)
    endpoint = broker.metadata.endpoint(leader, ctx.listener)
    if endpoint is None:
        return _not_available(key)
    return Coordinator(key=key, node_id=leader, host=endpoint[0], port=endpoint[1])


def _this_node(ctx: BrokerContext, key: str, ensure_created: Callable[[], object]) -> Coordinator:
    try:
        ensure_created()
    except Exception:
        log.exception("creating the coordinator's topic failed")
        return _not_available(key)
    host, port = ctx.broker.advertised_endpoint(ctx.listener)
    return Coordinator(key=key, node_id=ctx.broker.node_id, host=host, port=port)


def _denied(key: str, code: int) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code)


def _find(ctx: BrokerContext, key: str, key_type: int) -> Coordinator:
    if key_type == _GROUP and not authorized(ctx, _DESCRIBE, ResourceType.GROUP, key):
        return _denied(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == _TRANSACTION and not authorized(ctx, _DESCRIBE, _TXN_ID, key):
        return _denied(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if key_type == _SHARE and not authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return _denied(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker = ctx.broker
    cluster = is_cluster_mode(broker.config)
    if key_type == _GROUP:
        offsets = broker.group_coordinator_log
        if cluster:
            return _coordinator_in_cluster(ctx, key, OFFSETS_TOPIC, offsets.request_creation)
        return _this_node(ctx, key, offsets.ensure_created)
    if key_type == _TRANSACTION:
        state_log = broker.transaction_state_log
        if cluster:
            return _coordinator_in_cluster(
                ctx, key, TRANSACTION_STATE_TOPIC, state_log.ensure_created
            )
        return _this_node(ctx, key, state_log.ensure_created)
    if key_type == _SHARE:
        share_log = broker.share_coordinator.state_log
        if cluster:
            return _coordinator_in_cluster(
                ctx, key, SHARE_GROUP_STATE_TOPIC, share_log.ensure_created
            )
        return _this_node(ctx, key, share_log.ensure_created)
    return Coordinator(
        key=key,
        node_id=-1,
        host="",
        port=-1,
        error_code=ErrorCode.INVALID_REQUEST,
        error_message=f"Unknown coordinator type {key_type}",
    )


def handle(ctx: BrokerContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_find(ctx, key, request.key_type) for key in request.coordinator_keys]
        )
    found = _find(ctx, request.key, request.key_type if ctx.api_version >= 1 else _GROUP)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


HANDLER = ApiHandlerSpec(10, 0, 6, handle, "FindCoordinator")
