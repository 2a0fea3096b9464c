"""UpdateMetadata (key 6), v8 only (+ pydmq's ``metadata_offset`` and topic ``configs``).

Cluster mode only, on the control-plane listener only: feeds the broker's metadata cache
(alive brokers with their registration epochs, controller, topics with ids, partitions and
configs; see :class:`pydmq.broker.cluster.metadata_cache.MetadataCache`), fenced like
LeaderAndIsr: a refused request changes nothing (not even the applied metadata offset). A
single-node broker answers INVALID_REQUEST.

Authorization (as Kafka): CLUSTER_ACTION on the cluster (the controller's principal,
listed in ``super.users`` on a secured cluster), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._authorize import authorized_cluster
from pydmq.protocol.acl import AclOperation
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = ["HANDLER"]


async def handle(ctx: BrokerContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    control_plane = ctx.broker.control_plane
    if control_plane is None:
        return UpdateMetadataResponse(error_code=ErrorCode.INVALID_REQUEST)
    if not authorized_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await control_plane.update_metadata(request, f"{ctx.client_host}:{ctx.client_port}")


HANDLER = ApiHandlerSpec(6, 8, 8, handle, "UpdateMetadata")
