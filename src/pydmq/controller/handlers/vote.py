"""Vote (key 52), v0-v2, on the controller listener: a candidate asks this voter for its vote.

Decoded into the Raft core's :class:`~pydmq.raft.messages.VoteRequest` and answered by the
core through the driver (which persists the vote before the answer leaves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydmq.api.handler import ApiHandlerSpec, RequestContext
from pydmq.controller import raft_wire
from pydmq.protocol.errors import ErrorCode
from pydmq.protocol.messages.vote import VoteRequest, VoteResponse
from pydmq.raft import messages as rm

if TYPE_CHECKING:
    from pydmq.controller.runtime import ControllerRuntime

__all__ = ["make_handler"]


def make_handler(runtime: ControllerRuntime) -> ApiHandlerSpec:
    async def handle(ctx: RequestContext[object], request: VoteRequest) -> VoteResponse:
        try:
            raft_request = raft_wire.vote_from_wire(request)
        except raft_wire.WireError:
            return VoteResponse(error_code=ErrorCode.INVALID_REQUEST)
        response = await runtime.driver.handle_request(raft_request)
        assert isinstance(response, rm.VoteResponse)
        return raft_wire.vote_to_wire(response)

    return ApiHandlerSpec(52, 0, 2, handle, "Vote")
