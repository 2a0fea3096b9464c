"""StopReplica (key 5), v4 only: stop replicating partitions, deleting them if asked.

Cluster mode only, on the control-plane listener only (see
:meth:`pydmq.broker.cluster.runtime.BrokerCluster.stop_replica`): fenced like LeaderAndIsr; a
partition whose applied leader epoch is newer than the request's gets FENCED_LEADER_EPOCH,
and so does any negative leader epoch (Kafka's -1 and -2 sentinels skip nothing here: the
controller always sends the partition's real leader epoch). A single-node broker answers
INVALID_REQUEST.

Authorization (as Kafka): CLUSTER_ACTION on the cluster (the controller's principal,
listed in ``super.users`` on a secured cluster), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse

__all__ = ["HANDLER"]


async def handle(ctx: BrokerContext, request: StopReplicaRequest) -> StopReplicaResponse:
    control_plane = ctx.broker.control_plane
    if control_plane is None:
        return StopReplicaResponse(error_code=ErrorCode.INVALID_REQUEST)
    if not authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await control_plane.stop_replica(request, f"{ctx.client_host}:{ctx.client_port}")


HANDLER = ApiHandlerSpec(5, 4, 4, handle, "StopReplica")
