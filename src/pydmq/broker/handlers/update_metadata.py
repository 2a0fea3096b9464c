"""UpdateMetadata (key 6), v8 only (+ pydmq's ``metadata_offset`` and topic ``configs``).

Cluster mode only: feeds the broker's metadata cache (alive brokers, controller, topics with
ids, partitions and configs; see :class:`pydmq.broker.cluster.metadata_cache.MetadataCache`),
fenced like LeaderAndIsr. A single-node broker answers INVALID_REQUEST.
"""

from __future__ import annotations

from pydmq.broker.handler import ApiHandlerSpec, RequestContext
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = ["HANDLER"]


def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    cluster = ctx.broker.cluster
    if cluster is None:
        return UpdateMetadataResponse(error_code=ErrorCode.INVALID_REQUEST)
    return cluster.update_metadata(request)


HANDLER = ApiHandlerSpec(6, 8, 8, handle, "UpdateMetadata")
