"""InitializeShareGroupState (key 83), v0: a new share-partition state at a start offset
with nothing in flight, at a state epoch above the stored one (else FENCED_STATE_EPOCH)
(KIP-932). See :mod:`pydmq.broker.handlers._share_state`.
"""

from __future__ import annotations

from pydmq.api.handler import ApiHandlerSpec
from pydmq.broker.context import BrokerContext
from pydmq.broker.handlers._share_state import error_only, serve_request
from pydmq.protocol.messages import initialize_share_group_state as m

__all__ = ["HANDLER"]


async def handle(
    ctx: BrokerContext, request: m.InitializeShareGroupStateRequest
) -> m.InitializeShareGroupStateResponse:
    return await serve_request(
        ctx,
        request,
        lambda coordinator, key, p: coordinator.initialize_state(
            key, p.state_epoch, p.start_offset
        ),
        error_only(m.PartitionResult),
        m.InitializeShareGroupStateResponse,
        m.InitializeStateResult,
    )


HANDLER = ApiHandlerSpec(83, 0, m.REQUEST_MAX_VERSION, handle, "InitializeShareGroupState")
