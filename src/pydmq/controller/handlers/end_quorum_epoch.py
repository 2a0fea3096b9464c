"""EndQuorumEpoch (key 54), v0-v1: a resigning leader asks this voter to start an election.

v0 carries ``preferred_successors`` (ids), v1 ``preferred_candidates`` (id + directory id);
both become the core's ``preferred_successors``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.end_quorum_epoch import (
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
)
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(
        ctx: RequestContext[object], request: EndQuorumEpochRequest
    ) -> EndQuorumEpochResponse:
        try:
            raft_request = raft_wire.end_from_wire(request, ctx.api_version)
        except raft_wire.WireError:
            return EndQuorumEpochResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, rm.EndQuorumEpochResponse)
        return raft_wire.end_to_wire(response)

    return ApiHandlerSpec(54, 0, 1, handle, "EndQuorumEpoch")
