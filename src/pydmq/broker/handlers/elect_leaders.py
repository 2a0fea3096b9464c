"""ElectLeaders (key 43), v0-v2.

The controller runs preferred (0) or unclean (1) elections through the topic's replication
strategy: ELECTION_NOT_NEEDED where the preferred leader already leads (on a single node,
every partition), UNKNOWN_TOPIC_OR_PARTITION for an unknown one; a null list (all
partitions) reports only the partitions where an election was attempted. ``election_type``
must be 0 or 1 (v1+; INVALID_REQUEST).

The request is forwarded to the controller at the same version and its response returned
(:mod:`pydmq.broker.controller_channel`: the active controller in cluster mode,
REQUEST_TIMED_OUT when none answers; a single node's own, in process, whose one replica
already leads every partition).

Authorization (as Kafka): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Awaitable

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.broker.handlers._forward import forward_to_controller
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.elect_leaders import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)

__all__ = ["HANDLER"]


def _per_partition(
    request: ElectLeadersRequest, code: int, message: str | None
) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        error_code=ErrorCode.NONE,
        replica_election_results=[
            ReplicaElectionResult(
                topic=t.topic,
                partition_result=[
                    PartitionResult(partition_id=p, error_code=code, error_message=message)
                    for p in t.partitions
                ],
            )
            for t in request.topic_partitions or []
        ],
    )


def handle(
    ctx: BrokerContext, request: ElectLeadersRequest
) -> ElectLeadersResponse | Awaitable[ElectLeadersResponse]:
    if not authorized_cluster(ctx, AclOperation.ALTER):
        denied = _per_partition(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        denied.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return denied
    return forward_to_controller(
        ctx,
        request,
        lambda code, message: _per_partition(request, code, message),
        request.timeout,
    )


HANDLER = ApiHandlerSpec(43, 0, 2, handle, "ElectLeaders")
