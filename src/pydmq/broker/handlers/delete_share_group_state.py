"""DeleteShareGroupState (key 86), v0: a share-partition's state forgotten (a tombstone in
``__share_group_state``) (KIP-932). See :mod:`pydmq.broker.handlers._share_state`.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._share_state import error_only, serve_request
from pydmq.protocol.messages import delete_share_group_state as m

__all__ = ["HANDLER"]


async def handle(
    ctx: BrokerContext, request: m.DeleteShareGroupStateRequest
) -> m.DeleteShareGroupStateResponse:
    return await serve_request(
        ctx,
        request,
        lambda coordinator, key, p: coordinator.delete_state(key),
        error_only(m.PartitionResult),
        m.DeleteShareGroupStateResponse,
        m.DeleteStateResult,
    )


HANDLER = ApiHandlerSpec(86, 0, m.REQUEST_MAX_VERSION, handle, "DeleteShareGroupState")
