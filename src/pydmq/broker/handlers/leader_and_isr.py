"""LeaderAndIsr (key 4), v7 only: the controller tells this broker what it leads and follows.

Cluster mode only, on the control-plane listener only (see
:meth:`pydmq.broker.cluster.runtime.BrokerCluster.leader_and_isr`): fenced by broker epoch
(STALE_BROKER_EPOCH) and by the controller epoch the quorum confirms (STALE_CONTROLLER_EPOCH,
NOT_CONTROLLER; :mod:`pydmq.broker.cluster.fencing`); per partition, a state older than the
applied one (or without an epoch) gets STALE_CONTROLLER_EPOCH. Asynchronous: confirming a new
controller epoch may ask the voters. A single-node broker has no controller to obey and no
control-plane listener; a handler called there answers INVALID_REQUEST.

Authorization (as Kafka): CLUSTER_ACTION on the cluster (the controller's principal,
listed in ``super.users`` on a secured cluster), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse

__all__ = ["HANDLER"]


async def handle(ctx: BrokerContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    control_plane = ctx.broker.control_plane
    if control_plane is None:
        return LeaderAndIsrResponse(error_code=ErrorCode.INVALID_REQUEST)
    if not authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return LeaderAndIsrResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await control_plane.leader_and_isr(request, f"{ctx.client_host}:{ctx.client_port}")


HANDLER = ApiHandlerSpec(4, 7, 7, handle, "LeaderAndIsr")
