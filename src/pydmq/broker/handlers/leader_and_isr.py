"""LeaderAndIsr (key 4), v7 only: the controller tells this broker what it leads and follows.

Cluster mode only (see :meth:`pydmq.broker.cluster.runtime.BrokerCluster.leader_and_isr`):
fenced by controller epoch (STALE_CONTROLLER_EPOCH) and broker epoch (STALE_BROKER_EPOCH);
per partition, a state older than the applied one gets STALE_CONTROLLER_EPOCH. A single-node
broker has no controller to obey: it answers INVALID_REQUEST.
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse

__all__ = ["HANDLER"]


def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    cluster = ctx.broker.cluster
    if cluster is None:
        return LeaderAndIsrResponse(error_code=ErrorCode.INVALID_REQUEST)
    return cluster.leader_and_isr(request)


HANDLER = ApiHandlerSpec(4, 7, 7, handle, "LeaderAndIsr")
